package kueue

import (
	"errors"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PartlyWritten is the error of a change that failed after some of its
// writes went through, or may have (the answer to a write was lost). What
// was written stays; making the same change again finishes it, since each
// write sets its object to what the change says.
type PartlyWritten struct {
	// Written names what went through, in the order written ("namespace
	// hyperpod-ns-a", "cluster queue hyperpod-ns-a-clusterqueue").
	Written []string
	Err     error
	// Deleting: the change deletes (a team), which deleting again finishes.
	Deleting bool
}

func (e *PartlyWritten) Error() string { return e.Err.Error() }
func (e *PartlyWritten) Unwrap() error { return e.Err }

// writeSteps follows a change's writes, so that a failure says whether
// anything of it went through.
type writeSteps struct {
	done     []string
	deleting bool
}

// wrote records that what went through.
func (s *writeSteps) wrote(what string) { s.done = append(s.done, what) }

// failed is err, as PartlyWritten when something went through before it or
// the cluster's answer was lost (a write may have been made).
func (s *writeSteps) failed(err error) error {
	var status apierrors.APIStatus
	answered := errors.As(err, &status) || errors.Is(err, ErrNotTheConsoles)
	if len(s.done) == 0 && answered {
		return err
	}
	return &PartlyWritten{Written: slices.Clone(s.done), Err: err, Deleting: s.deleting}
}
