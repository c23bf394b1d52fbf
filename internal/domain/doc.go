// Package domain is what the console knows about GPU quota governance,
// without any I/O: team allocations and the cluster policy and the Kueue
// objects that enforce them (derivation of vCPU and memory from instance
// shapes, ClusterQueues, LocalQueues, flavors, priority classes, member
// bindings); the naming rules (a team's namespace and queues, and back);
// tasks read from Workloads (ReadWorkload, the one reading of a Workload),
// their reasons in words, queue order and statistics; team usage, the one
// borrowing rule (Borrows) and the one lending attribution rule; drift
// between an allocation and its objects, and adopting hand edits; revision
// diffs and the wording of changes; figures formatted for people.
//
// It has no clock (times are passed in), no clients, informers or listers,
// and knows nothing of HTTP or pages: it must not import client-go's
// clientsets, informers, listers or rest, Kueue's client-go, echo, templ, or
// the console's cluster, write, form, handlers and web packages.
package domain
