package domain

// The choices of an allocation and of the cluster policy.
type (
	// Lending is how a team shares its idle quota and uses others'.
	Lending string
	// Preemption is whether a team's higher-priority tasks may preempt its
	// lower ones.
	Preemption string
	// Prioritization is how queued tasks are ordered.
	Prioritization string
	// IdleAllocation is how idle compute is shared between teams.
	IdleAllocation string
)

const (
	LendAndBorrow           Lending        = "LendAndBorrow"
	Lend                    Lending        = "Lend"
	DontLend                Lending        = "DontLend"
	PreemptNever            Preemption     = "Never"
	PreemptLowerPriority    Preemption     = "LowerPriority"
	FirstComeFirstServe     Prioritization = "FirstComeFirstServe"
	TaskRanking             Prioritization = "TaskRanking"
	IdleFirstComeFirstServe IdleAllocation = "FirstComeFirstServe"
	IdleFairShare           IdleAllocation = "FairShare"
)
