package kueue

// Redefined is redefined, for the tests that feed it the apiserver's own
// objects.
var Redefined = redefined
