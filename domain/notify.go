package domain

// The events a notification rule can ask for (store.model.Rule.Events).
const (
	// NotifyExecutionDead: an execution's every attempt failed.
	NotifyExecutionDead = "execution.dead"
	// NotifyExecutionFailed: an attempt failed and will be retried.
	NotifyExecutionFailed = "execution.failed"
	// NotifyExecutionLate: an execution started more than the rule's
	// late_after after its scheduled time.
	NotifyExecutionLate = "execution.late"
	// NotifyExecutionSlow: an execution's last attempt ran longer than
	// the rule's slow_after.
	NotifyExecutionSlow = "execution.slow"
	// NotifyJobFailing: the rule's failing_after dead executions of a job
	// in a row.
	NotifyJobFailing = "job.failing"
	// NotifyJobRecovered: the first success of a job after the rule said
	// it was failing.
	NotifyJobRecovered = "job.recovered"
	// NotifyJobSilent: no success of a job within its schedule's interval
	// plus the rule's silent_grace.
	NotifyJobSilent = "job.silent"
	// NotifyHandlerOpen and NotifyHandlerClose: a handler's circuit
	// breaker opened (on some executor), and closed again (on every one).
	NotifyHandlerOpen  = "handler.open"
	NotifyHandlerClose = "handler.close"
)

// NotifyKinds are the events a rule can ask for, in the order the
// documentation lists them.
var NotifyKinds = []string{NotifyExecutionDead, NotifyExecutionFailed, NotifyJobFailing, NotifyJobRecovered,
	NotifyJobSilent, NotifyExecutionLate, NotifyExecutionSlow, NotifyHandlerOpen, NotifyHandlerClose,
	NotifyExecutionDependencyTimeout}

// ChannelSecretAD is the associated data a notification channel's secret
// is sealed with (secret.Keyring.Seal): a sealed value copied into another
// kind of secret (a secret header) does not open there.
var ChannelSecretAD = []byte("tock notification channel secret")
