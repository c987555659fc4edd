package archtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The files of deploy/ are examples CI cannot run (it has no container
// engine). These tests read them and check what an operator relies on:
// nothing is single, tockd finds every member of each store, and every
// variable they set is one tockd reads.

var deployDir = filepath.Join("..", "..", "deploy")

// doc is one YAML document, decoded (anchors and merge keys resolved).
type doc = map[string]any

// yamlDocs returns every document of a YAML file.
func yamlDocs(t *testing.T, path string) []doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []doc
	for {
		var d doc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a path of map keys and list indexes ("0") into v.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// str is v as a string ("" for none), numbers and booleans as YAML wrote them.
func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// list is v as a list (nil for anything else).
func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// tockdEnvVars returns the variables tockd reads: the env tags of
// cmd/tockd's Go files.
func tockdEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "cmd", "tockd", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	tag := regexp.MustCompile(`\benv:"([A-Z0-9_]+)"`)
	vars := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tag.FindAllStringSubmatch(string(b), -1) {
			vars[m[1]] = true
		}
	}
	if len(vars) < 10 {
		t.Fatalf("found only %d env tags in cmd/tockd; has the flag model moved?", len(vars))
	}
	return vars
}

// deployYAML returns the YAML files under deploy/, relative to it.
func deployYAML(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(deployDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			rel, err := filepath.Rel(deployDir, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDeployEnvVarsAreTockd checks every TOCK_* variable the deploy files
// set, in compose environments and Kubernetes env lists, against the
// variables tockd reads: a misspelt one would be ignored silently.
func TestDeployEnvVarsAreTockd(t *testing.T) {
	known := tockdEnvVars(t)
	seen := 0
	for _, f := range deployYAML(t) {
		for _, d := range yamlDocs(t, filepath.Join(deployDir, f)) {
			walkEnvNames(d, func(name string) {
				seen++
				if strings.HasPrefix(name, "TOCK_") && !known[name] {
					t.Errorf("deploy/%s sets %s, which no env tag in cmd/tockd names", f, name)
				}
			})
		}
	}
	if seen == 0 {
		t.Fatal("no environment variables found in deploy/")
	}
}

// walkEnvNames calls fn with every variable name set in v: the keys of
// "environment" maps (compose) and the names of "env" lists (Kubernetes).
func walkEnvNames(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			switch env := c.(type) {
			case map[string]any:
				if k == "environment" {
					for name := range env {
						fn(name)
					}
					continue
				}
			case []any:
				if k == "env" {
					for _, e := range env {
						fn(str(get(e, "name")))
					}
					continue
				}
			}
			walkEnvNames(c, fn)
		}
	case []any:
		for _, c := range x {
			walkEnvNames(c, fn)
		}
	}
}

// kubeObjects returns the Kubernetes objects of deploy/kubernetes.
func kubeObjects(t *testing.T) []doc {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []doc
	for _, f := range files {
		objs = append(objs, yamlDocs(t, f)...)
	}
	return objs
}

// findObject returns the object of that kind and name, or fails.
func findObject(t *testing.T, objs []doc, kind, name string) doc {
	t.Helper()
	for _, o := range objs {
		if str(o["kind"]) == kind && str(get(o, "metadata", "name")) == name {
			return o
		}
	}
	t.Fatalf("deploy/kubernetes: no %s %s", kind, name)
	return nil
}

// selects reports whether a PodDisruptionBudget selects pods of these labels
// (matchLabels only, which is what the manifests use).
func selects(pdb doc, labels map[string]any) bool {
	match, ok := get(pdb, "spec", "selector", "matchLabels").(map[string]any)
	if !ok || len(match) == 0 {
		return false
	}
	for k, v := range match {
		if str(labels[k]) != str(v) {
			return false
		}
	}
	return true
}

// checkPDB checks that one PodDisruptionBudget with maxUnavailable: 1
// selects the pods of a workload.
func checkPDB(t *testing.T, objs []doc, workload doc) {
	t.Helper()
	labels, _ := get(workload, "spec", "template", "metadata", "labels").(map[string]any)
	name := str(get(workload, "metadata", "name"))
	for _, o := range objs {
		if str(o["kind"]) != "PodDisruptionBudget" || !selects(o, labels) {
			continue
		}
		if got := str(get(o, "spec", "maxUnavailable")); got != "1" {
			t.Errorf("the PodDisruptionBudget of %s has maxUnavailable %q, want 1", name, got)
		}
		return
	}
	t.Errorf("deploy/kubernetes: no PodDisruptionBudget selects the pods of %s", name)
}

// containerEnv returns a container's env values (valueFrom ones as "").
func containerEnv(c any) map[string]string {
	env := map[string]string{}
	for _, e := range list(get(c, "env")) {
		env[str(get(e, "name"))] = str(get(e, "value"))
	}
	return env
}

// spreadsOverNodes reports whether a pod spec keeps its pods on different
// nodes: a topology spread or anti-affinity over kubernetes.io/hostname.
func spreadsOverNodes(spec any) bool {
	for _, c := range list(get(spec, "topologySpreadConstraints")) {
		if str(get(c, "topologyKey")) == "kubernetes.io/hostname" {
			return true
		}
	}
	anti := get(spec, "affinity", "podAntiAffinity")
	for _, k := range []string{"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"} {
		for _, term := range list(get(anti, k)) {
			if str(get(term, "topologyKey")) == "kubernetes.io/hostname" ||
				str(get(term, "podAffinityTerm", "topologyKey")) == "kubernetes.io/hostname" {
				return true
			}
		}
	}
	return false
}

// TestKubernetesTockdHasNothingSingle checks the tockd Deployment: 3 or
// more replicas on different nodes, one down at a time, probes on
// /readyz and /healthz, a termination grace longer than tockd's own
// shutdown grace, and replicated streams.
func TestKubernetesTockdHasNothingSingle(t *testing.T) {
	objs := kubeObjects(t)
	dep := findObject(t, objs, "Deployment", "tockd")
	if n, _ := get(dep, "spec", "replicas").(int); n < 3 {
		t.Errorf("tockd Deployment: replicas %v, want at least 3", get(dep, "spec", "replicas"))
	}
	checkPDB(t, objs, dep)
	spec := get(dep, "spec", "template", "spec")
	if !spreadsOverNodes(spec) {
		t.Error("tockd Deployment: no topology spread or anti-affinity over kubernetes.io/hostname")
	}
	c := get(spec, "containers", "0")
	if p := str(get(c, "readinessProbe", "httpGet", "path")); p != "/readyz" {
		t.Errorf("tockd readiness probe path %q, want /readyz", p)
	}
	if p := str(get(c, "livenessProbe", "httpGet", "path")); p != "/healthz" {
		t.Errorf("tockd liveness probe path %q, want /healthz", p)
	}
	env := containerEnv(c)
	if env["TOCK_STREAM_REPLICAS"] != "3" {
		t.Errorf("tockd TOCK_STREAM_REPLICAS %q, want 3", env["TOCK_STREAM_REPLICAS"])
	}
	grace, err := time.ParseDuration(env["TOCK_SHUTDOWN_GRACE"])
	if err != nil {
		t.Fatalf("tockd TOCK_SHUTDOWN_GRACE %q: %v", env["TOCK_SHUTDOWN_GRACE"], err)
	}
	term, ok := get(spec, "terminationGracePeriodSeconds").(int)
	if !ok || time.Duration(term)*time.Second <= grace {
		t.Errorf("tockd terminationGracePeriodSeconds %v, want more than TOCK_SHUTDOWN_GRACE %v", get(spec, "terminationGracePeriodSeconds"), grace)
	}
	for _, k := range []string{"TOCK_ETCD_ENDPOINTS", "TOCK_NATS_URL"} {
		if n := len(strings.Split(env[k], ",")); n < 3 {
			t.Errorf("tockd %s names %d servers, want 3: %q", k, n, env[k])
		}
	}
}

// TestKubernetesStoresHaveNothingSingle checks etcd and NATS: 3 members
// on different nodes, one down at a time; and Postgres: Patroni with a
// synchronous standby.
func TestKubernetesStoresHaveNothingSingle(t *testing.T) {
	objs := kubeObjects(t)
	for _, name := range []string{"etcd", "nats"} {
		sts := findObject(t, objs, "StatefulSet", name)
		if n, _ := get(sts, "spec", "replicas").(int); n != 3 {
			t.Errorf("%s StatefulSet: replicas %v, want 3", name, get(sts, "spec", "replicas"))
		}
		if !spreadsOverNodes(get(sts, "spec", "template", "spec")) {
			t.Errorf("%s StatefulSet: no topology spread or anti-affinity over kubernetes.io/hostname", name)
		}
		checkPDB(t, objs, sts)
	}
	pg := findObject(t, objs, "postgresql", "tock-pg")
	if n, _ := get(pg, "spec", "numberOfInstances").(int); n < 2 {
		t.Errorf("postgresql tock-pg: numberOfInstances %v, want at least 2", get(pg, "spec", "numberOfInstances"))
	}
	if get(pg, "spec", "patroni", "synchronous_mode") != true {
		t.Error("postgresql tock-pg: patroni.synchronous_mode is not true")
	}
}

// composeServices returns the services of a compose file whose image or
// Dockerfile contains match.
func composeServices(t *testing.T, d doc, match string) map[string]any {
	t.Helper()
	svcs, ok := d["services"].(map[string]any)
	if !ok {
		t.Fatal("compose file without services")
	}
	out := map[string]any{}
	for name, s := range svcs {
		if strings.Contains(str(get(s, "image")), match) || strings.Contains(str(get(s, "build", "dockerfile")), match) {
			out[name] = s
		}
	}
	return out
}

// serviceEnv returns a compose service's environment map as strings.
func serviceEnv(s any) map[string]string {
	env := map[string]string{}
	m, _ := get(s, "environment").(map[string]any)
	for k, v := range m {
		env[k] = str(v)
	}
	return env
}

// TestComposeHAHasNothingSingle checks compose-ha.yaml: one etcd cluster
// of 3, a NATS cluster of 3, two Patroni members in synchronous mode on
// that etcd, and tockd nodes that each name every member of each.
func TestComposeHAHasNothingSingle(t *testing.T) {
	docs := yamlDocs(t, filepath.Join(deployDir, "compose-ha.yaml"))
	if len(docs) != 1 {
		t.Fatalf("compose-ha.yaml: %d documents, want 1", len(docs))
	}
	d := docs[0]

	etcd := composeServices(t, d, "coreos/etcd")
	etcdNames := checkEtcdCluster(t, etcd)
	natsNames := checkNATSCluster(t, composeServices(t, d, "nats:"))
	pgNames := checkPatroni(t, composeServices(t, d, "deploy/patroni/Dockerfile"), etcdNames)

	tockd := composeServices(t, d, "deploy/Dockerfile")
	if len(tockd) < 3 {
		t.Errorf("compose-ha.yaml: %d tockd services, want at least 3", len(tockd))
	}
	for name, s := range tockd {
		env := serviceEnv(s)
		checkList(t, name, "TOCK_ETCD_ENDPOINTS", env, etcdNames, "http://%s:2379")
		checkList(t, name, "TOCK_NATS_URL", env, natsNames, "nats://%s:4222")
		checkPostgresURL(t, name, env["TOCK_POSTGRES_URL"], pgNames)
		if env["TOCK_STREAM_REPLICAS"] != "3" {
			t.Errorf("%s: TOCK_STREAM_REPLICAS %q, want 3", name, env["TOCK_STREAM_REPLICAS"])
		}
		grace, err := time.ParseDuration(env["TOCK_SHUTDOWN_GRACE"])
		stop, err2 := time.ParseDuration(str(get(s, "stop_grace_period")))
		if err != nil || err2 != nil || stop <= grace {
			t.Errorf("%s: stop_grace_period %q must exceed TOCK_SHUTDOWN_GRACE %q", name, str(get(s, "stop_grace_period")), env["TOCK_SHUTDOWN_GRACE"])
		}
	}
}

// checkEtcdCluster checks 3 etcd members bootstrapping one cluster: the
// same initial cluster and token, naming each member by its service.
func checkEtcdCluster(t *testing.T, etcd map[string]any) []string {
	t.Helper()
	if len(etcd) != 3 {
		t.Errorf("compose-ha.yaml: %d etcd services, want 3", len(etcd))
	}
	var names []string
	cluster, token := "", ""
	for name, s := range etcd {
		names = append(names, name)
		env := serviceEnv(s)
		if cluster == "" {
			cluster, token = env["ETCD_INITIAL_CLUSTER"], env["ETCD_INITIAL_CLUSTER_TOKEN"]
		}
		if env["ETCD_INITIAL_CLUSTER"] != cluster || env["ETCD_INITIAL_CLUSTER_TOKEN"] != token || token == "" {
			t.Errorf("%s: initial cluster %q (token %q) differs from the others' %q (%q)", name, env["ETCD_INITIAL_CLUSTER"], env["ETCD_INITIAL_CLUSTER_TOKEN"], cluster, token)
		}
		if env["ETCD_NAME"] != name || env["ETCD_INITIAL_ADVERTISE_PEER_URLS"] != "http://"+name+":2380" {
			t.Errorf("%s: ETCD_NAME %q, peer URL %q; want its service name", name, env["ETCD_NAME"], env["ETCD_INITIAL_ADVERTISE_PEER_URLS"])
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if !slices.Contains(strings.Split(cluster, ","), n+"=http://"+n+":2380") {
			t.Errorf("ETCD_INITIAL_CLUSTER %q does not name member %s", cluster, n)
		}
	}
	return names
}

// checkNATSCluster checks 3 NATS servers with JetStream, clustered by
// routes to each other (deploy/nats/cluster.conf).
func checkNATSCluster(t *testing.T, nats map[string]any) []string {
	t.Helper()
	if len(nats) != 3 {
		t.Errorf("compose-ha.yaml: %d NATS services, want 3", len(nats))
	}
	conf, err := os.ReadFile(filepath.Join(deployDir, "nats", "cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"jetstream {", "cluster {", "server_name: $NATS_SERVER_NAME"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nats/cluster.conf lacks %q", want)
		}
	}
	var names []string
	for name, s := range nats {
		names = append(names, name)
		if !slices.Contains(list(get(s, "command")), any("/etc/nats/cluster.conf")) {
			t.Errorf("%s does not run with nats/cluster.conf", name)
		}
		if serviceEnv(s)["NATS_SERVER_NAME"] != name {
			t.Errorf("%s: NATS_SERVER_NAME %q, want its service name", name, serviceEnv(s)["NATS_SERVER_NAME"])
		}
		if !strings.Contains(string(conf), `"nats-route://`+name+`:6222"`) {
			t.Errorf("nats/cluster.conf has no route to %s", name)
		}
	}
	slices.Sort(names)
	return names
}

// checkPatroni checks two Patroni members in synchronous mode whose store
// is the compose file's etcd cluster.
func checkPatroni(t *testing.T, pg map[string]any, etcdNames []string) []string {
	t.Helper()
	if len(pg) != 2 {
		t.Errorf("compose-ha.yaml: %d Patroni services, want 2", len(pg))
	}
	var names []string
	for name, s := range pg {
		names = append(names, name)
		if serviceEnv(s)["PATRONI_NAME"] != name {
			t.Errorf("%s: PATRONI_NAME %q, want its service name", name, serviceEnv(s)["PATRONI_NAME"])
		}
	}
	slices.Sort(names)
	docs := yamlDocs(t, filepath.Join(deployDir, "patroni", "patroni.yml"))
	if len(docs) != 1 {
		t.Fatalf("patroni/patroni.yml: %d documents, want 1", len(docs))
	}
	if get(docs[0], "bootstrap", "dcs", "synchronous_mode") != true {
		t.Error("patroni/patroni.yml: bootstrap.dcs.synchronous_mode is not true")
	}
	hosts := list(get(docs[0], "etcd3", "hosts"))
	for _, n := range etcdNames {
		if !slices.Contains(hosts, any(n+":2379")) {
			t.Errorf("patroni/patroni.yml: etcd3.hosts %v lacks %s:2379", hosts, n)
		}
	}
	return names
}

// checkList checks that a comma-separated variable names each member.
func checkList(t *testing.T, svc, key string, env map[string]string, members []string, format string) {
	t.Helper()
	got := strings.Split(env[key], ",")
	for _, m := range members {
		if want := fmt.Sprintf(format, m); !slices.Contains(got, want) {
			t.Errorf("%s: %s %q lacks %s", svc, key, env[key], want)
		}
	}
}

// checkPostgresURL checks a multi-host URL naming every Patroni member
// that asks for the member that accepts writes.
func checkPostgresURL(t *testing.T, svc, raw string, members []string) {
	t.Helper()
	rest, ok := strings.CutPrefix(raw, "postgres://")
	at := strings.LastIndex(rest, "@")
	slash := strings.Index(rest, "/")
	if !ok || at < 0 || slash < at {
		t.Errorf("%s: TOCK_POSTGRES_URL %q is not postgres://user:password@hosts/db", svc, raw)
		return
	}
	hosts := strings.Split(rest[at+1:slash], ",")
	for _, m := range members {
		if !slices.Contains(hosts, m+":5432") {
			t.Errorf("%s: TOCK_POSTGRES_URL hosts %v lack %s:5432", svc, hosts, m)
		}
	}
	_, query, _ := strings.Cut(rest[slash:], "?")
	q, err := url.ParseQuery(query)
	if err != nil || q.Get("target_session_attrs") != "read-write" {
		t.Errorf("%s: TOCK_POSTGRES_URL %q lacks target_session_attrs=read-write", svc, raw)
	}
}

// TestDeployYAMLParses reads every YAML file of deploy/, so that a syntax
// error in an example the tests above do not look into still fails CI.
func TestDeployYAMLParses(t *testing.T) {
	files := deployYAML(t)
	if len(files) < 6 {
		t.Fatalf("found %d YAML files in deploy/: %v", len(files), files)
	}
	for _, f := range files {
		if len(yamlDocs(t, filepath.Join(deployDir, f))) == 0 {
			t.Errorf("deploy/%s holds no YAML document", f)
		}
	}
}
