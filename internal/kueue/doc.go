// Package kueue is the console's side of the Kubernetes API: the informer
// caches (pages never list from the apiserver) and what is read from them,
// the live read model the dashboards show, the one apply path (server-side
// apply with audit annotations, dry runs, deletes, and the requests each
// change makes as permissions), the revision histories and Events the
// console records, and the users' permissions (SubjectAccessReviews about
// them). Every request is made with the console's own identity.
//
// What the objects mean is the domain's business; this package moves them.
// It must not import echo, templ, or the console's write, handlers and web
// packages.
package kueue
