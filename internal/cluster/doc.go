// Package cluster is the console's side of the Kubernetes API: the informer
// caches (pages never list from the apiserver) and what is read from them,
// the live read model the dashboards show, the one apply path (server-side
// apply with audit annotations, dry runs, deletes), the revision histories
// and Events the console records with its own identity, the clients that act
// as a signed-in user (impersonation), and the users' permissions
// (SelfSubjectAccessReviews).
//
// What the objects mean is the domain's business; this package moves them.
// It must not import echo, templ, or the console's write, handlers and web
// packages.
package cluster
