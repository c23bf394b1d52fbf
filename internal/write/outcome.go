package write

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/form"
	"github.com/openquota/console/internal/kueue"
)

// Kind is how a change ended.
type Kind int

const (
	// Saved: the change is in the cluster, and in the console's read model.
	Saved Kind = iota
	// Rejected: the values were refused, by the form's validation (Fields)
	// or by the cluster (Kueue's webhooks, the apiserver's validation).
	Rejected
	// Conflict: someone else changed the same thing since the form was
	// loaded (Changes, and Current to load the form with).
	Conflict
	// Forbidden: Kubernetes does not allow the user this change.
	Forbidden
	// Unavailable: the cluster could not be reached or was too busy.
	Unavailable
	// NotFound: what the change is about does not exist (any more).
	NotFound
)

// Outcome is the end of a change, for one helper to answer with.
type Outcome struct {
	Kind Kind
	// Message says, for the page, what happened: the flash message when
	// Saved, else why nothing (or not everything) was changed.
	Message string
	// Fields are the form's field errors (Rejected by validation).
	Fields form.Errors
	// Changes are, in words, what the other change did (Conflict).
	Changes []string
	// Current is the stored version to load the form with again (Conflict).
	Current *Loaded
}

// Status is the HTTP status a page answers an Outcome with (a redirect
// after a save).
func (o Outcome) Status() int {
	switch o.Kind {
	case Saved:
		return http.StatusSeeOther
	case Rejected:
		return http.StatusUnprocessableEntity
	case Conflict:
		return http.StatusConflict
	case Forbidden:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

func saved(msg string) Outcome                { return Outcome{Kind: Saved, Message: msg} }
func rejected(msg string) Outcome             { return Outcome{Kind: Rejected, Message: msg} }
func rejectedFields(errs form.Errors) Outcome { return Outcome{Kind: Rejected, Fields: errs} }
func notFound(format string, args ...any) Outcome {
	return Outcome{Kind: NotFound, Message: fmt.Sprintf(format, args...)}
}

// Loaded is the version of a team an edit form was loaded with.
type Loaded struct {
	ResourceVersion string
	Allocation      domain.Team
}

// consoleAccount is who makes every request of a change: the console's own
// identity (its ServiceAccount in a cluster).
const consoleAccount = "the console's own account"

// notAllowed is the answer to a change the cluster does not allow the user:
// what they may not do, request by request.
func notAllowed(user, what string, denied []kueue.Permission) Outcome {
	missing := make([]string, len(denied))
	for i, p := range denied {
		missing[i] = p.String()
	}
	return Outcome{Kind: Forbidden, Message: fmt.Sprintf("You may not change %s: your account %s is not allowed to make this change in the cluster, so nothing was changed. "+
		"Ask a platform admin for the quota-console-admin role. The cluster does not allow you to %s.", what, user, strings.Join(missing, "; "))}
}

// failedForUser is failed for a change the signed-in user was allowed to
// make: a refusal by RBAC is then one of the console's own account, whose
// roles are missing, not the user's.
func failedForUser(err error, what string) Outcome {
	var status apierrors.APIStatus
	if errors.As(err, &status) && apierrors.IsForbidden(err) && !isWebhookDenial(status.Status().Message) && !isPolicyDenial(status.Status().Message) {
		return Outcome{Kind: Forbidden, Message: fmt.Sprintf("The console may not change %s: its own account is not allowed to make this change in the cluster, so nothing was changed. "+
			"Ask a cluster admin to apply the console's RBAC (deploy/rbac, or its Helm chart). The cluster said: %s.", what, status.Status().Message)}
	}
	return failed(err, consoleAccount, what)
}

// failed turns an error of the cluster into an Outcome, in words: who may
// not do what, what Kueue or the admission policy refused, or that the
// cluster did not answer. The raw error goes to the log only.
func failed(err error, who, what string) Outcome {
	if pw := (*kueue.PartlyWritten)(nil); errors.As(err, &pw) {
		return partlyWritten(failed(pw.Err, who, what), pw)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return Outcome{Kind: Unavailable, Message: "The cluster could not be reached, so nothing was changed. Try again in a moment."}
	}
	s := status.Status()
	switch {
	case isWebhookDenial(s.Message):
		// Kueue's validating webhooks answer 403 too: a refusal of the values, not of the user.
		return rejected("Kueue refused this allocation, so nothing was changed: " + s.Message + ".")
	case isPolicyDenial(s.Message):
		// The admission policy of deploy/rbac: the console changes only what it manages.
		return rejected("The cluster's admission policy refused this change, so nothing was changed: " + s.Message + ".")
	case apierrors.IsForbidden(err):
		return Outcome{Kind: Forbidden, Message: fmt.Sprintf("You may not change %s: %s is not allowed to make this change in the cluster, so nothing was changed. "+
			"Ask a platform admin for the quota-console-admin role. The cluster said: %s.", what, who, s.Message)}
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		var causes []string
		if s.Details != nil {
			for _, c := range s.Details.Causes {
				msg := c.Message
				if c.Field != "" {
					msg = c.Field + ": " + msg
				}
				causes = append(causes, msg)
			}
		}
		if len(causes) == 0 {
			causes = append(causes, s.Message)
		}
		return rejected("Kueue refused this allocation, so nothing was changed: " + strings.Join(causes, "; ") + ".")
	case apierrors.IsConflict(err):
		return Outcome{Kind: Conflict, Message: "Someone changed " + what + " at the same time. Reload to see their change, then save again."}
	case apierrors.IsNotFound(err):
		return notFound("%s no longer exists in the cluster; nothing was changed.", upperFirst(what))
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err):
		return Outcome{Kind: Unavailable, Message: "The cluster was too busy to answer. Saving again finishes the change."}
	case strings.Contains(s.Message, "webhook"):
		return Outcome{Kind: Unavailable, Message: "Kueue's admission webhook did not answer, so nothing was changed. Check that the Kueue controller is running, then try again."}
	case s.Code >= 500:
		return Outcome{Kind: Unavailable, Message: "The cluster could not be reached properly (it answered " + s.Message + "), so nothing was changed. Try again in a moment."}
	}
	return rejected(fmt.Sprintf("The cluster refused the change: %s.", s.Message))
}

// isPolicyDenial tells a ValidatingAdmissionPolicy's refusal (403 as well)
// from a refusal by RBAC.
func isPolicyDenial(message string) bool {
	return strings.Contains(message, "ValidatingAdmissionPolicy") && strings.Contains(message, "denied request")
}

// isWebhookDenial tells an admission webhook's refusal (which Kubernetes also
// reports as 403 Forbidden) from a refusal of the user.
func isWebhookDenial(message string) bool {
	return strings.Contains(message, "admission webhook") && strings.Contains(message, "denied the request")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// RevisionsProblem explains why a revision history could not be read.
func RevisionsProblem(s domain.Settings, err error) string {
	if apierrors.IsForbidden(err) {
		return "The console may not read its revision histories (ConfigMaps in its namespace " + s.State() +
			"), so they are not shown. Ask a cluster admin to apply the console's RBAC from deploy/rbac."
	}
	return "The revision history could not be read from the cluster right now."
}

// partlyWritten is the outcome of a change that failed partway: o, the
// outcome of its failure, says what the failure was, and this what went
// through, so that nobody reads "nothing was changed" of a change half
// made. Making the change again finishes it.
func partlyWritten(o Outcome, pw *kueue.PartlyWritten) Outcome {
	cause := o.Message
	for _, nothing := range []string{", so nothing was changed", "; nothing was changed", " so nothing was changed"} {
		cause = strings.Replace(cause, nothing, "", 1)
	}
	done := "part of it may have gone through"
	if len(pw.Written) > 0 {
		done = "this went through: " + strings.Join(pw.Written, ", ")
	}
	again := " Making the same change again finishes it (a new team shows on the Teams page: save its form there)."
	if pw.Deleting {
		again = " Deleting again finishes it (the team stays on the Teams page until then)."
	}
	o.Message = "The change stopped partway, and " + done + ". " + cause + again
	return o
}
