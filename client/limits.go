package client

// The API's media type for errors, a problem type and its limits, as
// api/openapi.yaml documents them. The api package's constants of the
// same names are the server's; a test keeps the two equal.
const (
	// ProblemContentType is the media type of every error answer.
	ProblemContentType = "application/problem+json"
	// ProblemValidation is the type of a problem whose Errors name each
	// bad field of the request.
	ProblemValidation = "https://tock.dev/problems/validation"

	// MaxBatchJobs is the most jobs one POST /v1/jobs:batch request may
	// create.
	MaxBatchJobs = 1000
	// MaxBatchBytes bounds the body of a POST /v1/jobs:batch request.
	MaxBatchBytes = 16 << 20
)
