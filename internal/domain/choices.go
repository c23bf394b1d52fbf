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

// Meaning says what a lending choice does, in the words of HyperPod task
// governance's three sharing strategies, and how Kueue enforces it.
func (l Lending) Meaning() string {
	switch l {
	case LendAndBorrow:
		return "Lend and borrow: other teams of the cohort may use this team's idle quota (up to its lend limits, Kueue's lendingLimit, where a quota row sets them), and this team may borrow theirs up to its borrow limit (Kueue's borrowingLimit). Lent quota comes back: Kueue preempts the borrowers when this team needs it."
	case Lend:
		return "Lend only: other teams may use this team's idle quota (up to its lend limits, where a quota row sets them; and give it back when it is needed); this team never runs on more than its own quota (borrowingLimit 0)."
	case DontLend:
		return "Don't lend: this team's quota is for its own tasks only, even when idle (lendingLimit 0), and it borrows nothing (borrowingLimit 0)."
	}
	return ""
}

// FairShareWeightMeaning explains the fair-share weight, as HyperPod's.
const FairShareWeightMeaning = "How large the team's share of idle compute is next to other teams' (Kueue's fairSharing.weight): a team of weight 20 gets twice the idle GPUs of a team of weight 10 when both want them, and gives back first what it borrowed beyond its share. 0: the team gets idle compute only when no other team needs it."
