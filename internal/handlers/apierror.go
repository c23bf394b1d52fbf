package handlers

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// explainWriteError turns an apiserver or webhook refusal into a sentence for
// the admin; the raw error goes to the log only.
func explainWriteError(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "The cluster could not be reached, so nothing was changed. Try again in a moment."
	}
	s := status.Status()
	// Kueue's validating webhooks answer 403 too: that is a refusal of the
	// values, not of the user.
	switch {
	case isWebhookDenial(s.Message):
		return "Kueue refused this allocation, so nothing was changed: " + s.Message + "."
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
		return "Kueue refused this allocation, so nothing was changed: " + strings.Join(causes, "; ") + "."
	case apierrors.IsForbidden(err):
		return "You are not allowed to make this change in the cluster: " + s.Message + "."
	case apierrors.IsConflict(err):
		return "Someone changed this team at the same time. Reload to see their change, then save again."
	case apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err):
		return "The cluster was too busy to answer. Saving again finishes the change."
	case strings.Contains(s.Message, "webhook"):
		return "Kueue's admission webhook did not answer, so nothing was changed. Check that the Kueue controller is running, then try again."
	}
	return fmt.Sprintf("The cluster refused the change: %s.", s.Message)
}

// isWebhookDenial tells an admission webhook's refusal (which Kubernetes also
// reports as 403 Forbidden) from a refusal of the user.
func isWebhookDenial(message string) bool {
	return strings.Contains(message, "admission webhook") && strings.Contains(message, "denied the request")
}
