// Package jobs is what a user can do to jobs and their executions: create
// (with the first run computed from the schedule and the database clock),
// change, pause, resume, delete, run now, cancel and re-drive.
//
// It holds the domain rules of those use cases — what a valid job is, how
// each change moves a job's state and next run, how a change survives a
// concurrent firing — so that the REST API, tockbench and later features
// apply the same rules. Transports (the API's JSON, a command's flags)
// check the shape of what they receive and translate it into NewJob and
// Patch; jobs checks the values and answers with typed errors.
package jobs
