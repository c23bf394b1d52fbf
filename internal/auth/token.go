package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrTokenRejected is a token the cluster does not accept (unknown, expired,
// revoked, or for another audience).
var ErrTokenRejected = errors.New("the cluster did not accept this token")

// TokenReviewer says whose a bearer token is.
type TokenReviewer interface {
	Review(ctx context.Context, token string) (User, error)
}

// KubeTokenReviewer asks the apiserver with a TokenReview
// (authentication.k8s.io/v1), as the console's own identity (which needs
// create on tokenreviews).
type KubeTokenReviewer struct {
	Client kubernetes.Interface
	// Audiences, when set, are the audiences the token must be valid for
	// (--auth-token-audience); empty means the apiserver's own.
	Audiences []string
}

// Review implements TokenReviewer.
func (k KubeTokenReviewer) Review(ctx context.Context, token string) (User, error) {
	token = cleanToken(token)
	if token == "" {
		return User{}, ErrTokenRejected
	}
	res, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: k.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return User{}, fmt.Errorf("token review: %w", err)
	}
	if !res.Status.Authenticated || res.Status.User.Username == "" {
		return User{}, ErrTokenRejected
	}
	u := User{Name: res.Status.User.Username, Groups: res.Status.User.Groups, UID: res.Status.User.UID}
	for k, v := range res.Status.User.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = []string(v)
	}
	return u, nil
}

// TokenExpiry is when a JWT bearer token (a service account token, an OIDC
// ID token) expires, from its exp claim; zero for other tokens. The claim is
// read only after a TokenReview accepted the token, so it needs no signature
// check here: it only makes the session end with the token.
func TokenExpiry(token string) time.Time {
	parts := strings.Split(cleanToken(token), ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil {
		return time.Time{}
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}
	}
	return time.Unix(int64(exp), 0)
}

func cleanToken(token string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(token), "Bearer "))
}
