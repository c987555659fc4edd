package client_test

import (
	"testing"

	"github.com/tock-sched/tock/api"
	"github.com/tock-sched/tock/client"
)

// The client's copies of the API's constants are the server's.
func TestConstantsMatchTheServer(t *testing.T) {
	for _, c := range []struct {
		name           string
		client, server any
	}{
		{"ProblemContentType", client.ProblemContentType, api.ProblemContentType},
		{"ProblemValidation", client.ProblemValidation, api.ProblemValidation},
		{"MaxBatchJobs", client.MaxBatchJobs, api.MaxBatchJobs},
		{"MaxBatchBytes", client.MaxBatchBytes, api.MaxBatchBytes},
	} {
		if c.client != c.server {
			t.Errorf("client.%s = %v, api.%s = %v", c.name, c.client, c.name, c.server)
		}
	}
}
