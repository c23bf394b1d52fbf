// Package kueue is the console's side of the Kubernetes API: the informer
// caches (pages never list from the apiserver) and what is read from them,
// the live read model the dashboards show, the one apply path (server-side
// apply with audit annotations, dry runs, deletes, and the requests each
// change makes as permissions), the revision histories and Events the
// console records, and the users' permissions (SubjectAccessReviews about
// them). Every request is made with the console's own identity.
//
// What the objects mean is the domain's business; this package moves them.
// Of the console it imports only domain and memo: not echo, templ, nor the
// console's auth, write, handlers, app and web packages (what it needs of
// them, such as when a sign-out expires, it is given).
package kueue
