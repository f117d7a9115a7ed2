package pkid

import "errors"

var (
	// ErrInvalidConfig is returned by Config.Validate.
	ErrInvalidConfig = errors.New("invalid pkid configuration")
	// ErrIncomplete is returned when a stored ClusterPKI lacks a CA or the service-account
	// key; pkid then issues the whole bundle afresh.
	ErrIncomplete = errors.New("pki record is incomplete")
	// ErrInfraIncomplete is returned when a Ready infra record has no usable endpoint.
	ErrInfraIncomplete = errors.New("infra record has no usable endpoint")
)
