package kueue

import "context"

type actorKey struct{}

// WithActor records who makes the changes applied with ctx (the signed-in
// user), for audit annotations, revisions and events.
func WithActor(ctx context.Context, user string) context.Context {
	return context.WithValue(ctx, actorKey{}, user)
}

// ActorFrom returns the user recorded by WithActor, or "" when unknown.
func ActorFrom(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
}
