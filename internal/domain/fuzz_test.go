package domain_test

import (
	"math"
	"testing"

	"github.com/openquota/console/internal/domain"
)

// maxFormNumber is the largest number the team form accepts in a quota field
// (form.maxQuotaNumeric): DeriveQuota never sees more.
const maxFormNumber = 1_000_000

// boundedInput maps any fuzzed int64 onto what the form lets through:
// 0..maxFormNumber.
func boundedInput(x int64) int64 {
	if x < 0 {
		x = -(x + 1) // no overflow on math.MinInt64
	}
	return x % (maxFormNumber + 1)
}

// shapeFor picks a catalog shape; one index past the catalog is a live node
// type that reports no resources at all (allocatable empty).
func shapeFor(i uint8) domain.InstanceShape {
	n := len(domain.Catalog) + 1
	if k := int(i) % n; k < len(domain.Catalog) {
		return domain.Catalog[k]
	}
	return domain.InstanceShape{Type: "live.empty"}
}

// FuzzDeriveQuota checks DeriveQuota over catalog shapes with the inputs the
// form can hand it: no panic, nothing negative, given values kept, a count N
// giving N whole instances.
func FuzzDeriveQuota(f *testing.F) {
	// shape, has/value for count, GPUs, Neuron, vCPU, memory (GiB).
	f.Add(uint8(2), true, int64(2), false, int64(0), false, int64(0), false, int64(0), false, int64(0))
	f.Add(uint8(2), false, int64(0), true, int64(2), false, int64(0), false, int64(0), false, int64(0))
	f.Add(uint8(7), false, int64(0), true, int64(2), false, int64(0), false, int64(0), false, int64(0))
	f.Add(uint8(15), false, int64(0), true, int64(1), false, int64(0), true, int64(48), false, int64(0))
	f.Add(uint8(20), false, int64(0), false, int64(0), true, int64(4), false, int64(0), false, int64(0))
	f.Add(uint8(27), false, int64(0), false, int64(0), false, int64(0), true, int64(2), false, int64(0))
	f.Add(uint8(2), false, int64(0), true, int64(4), false, int64(0), true, int64(10), true, int64(100))
	f.Add(uint8(7), true, int64(3), false, int64(0), false, int64(0), false, int64(0), true, int64(50))
	// Nasty: zeros, the form's maximum everywhere, GPUs on a CPU type,
	// Neuron on a GPU type, a type with no resources, int64 extremes.
	f.Add(uint8(0), true, int64(0), true, int64(0), true, int64(0), true, int64(0), true, int64(0))
	f.Add(uint8(2), true, int64(maxFormNumber), false, int64(0), false, int64(0), false, int64(0), false, int64(0))
	f.Add(uint8(5), false, int64(0), true, int64(maxFormNumber), false, int64(0), true, int64(maxFormNumber), true, int64(maxFormNumber))
	f.Add(uint8(28), false, int64(0), true, int64(8), false, int64(0), false, int64(0), false, int64(0))
	f.Add(uint8(2), false, int64(0), false, int64(0), true, int64(16), false, int64(0), false, int64(0))
	f.Add(uint8(len(domain.Catalog)), false, int64(0), true, int64(3), false, int64(0), true, int64(7), false, int64(0))
	f.Add(uint8(1), true, int64(math.MaxInt64), true, int64(math.MinInt64), true, int64(-1), true, int64(math.MaxInt64), true, int64(-999))

	f.Fuzz(func(t *testing.T, shapeIdx uint8, hasCount bool, count int64, hasGPUs bool, gpus int64,
		hasNeuron bool, neuron int64, hasVCPU bool, vcpu int64, hasMem bool, mem int64) {
		shape := shapeFor(shapeIdx)
		opt := func(has bool, v int64) *int64 {
			if !has {
				return nil
			}
			b := boundedInput(v)
			return &b
		}
		in := domain.QuotaInput{InstanceType: shape.Type, Count: opt(hasCount, count), GPUs: opt(hasGPUs, gpus),
			Neuron: opt(hasNeuron, neuron), VCPU: opt(hasVCPU, vcpu), MemoryGiB: opt(hasMem, mem)}
		q := domain.DeriveQuota(in, shape)

		if q.GPUs < 0 || q.Neuron < 0 || q.EFA < 0 || q.CPUMilli < 0 || q.MemoryMiB < 0 {
			t.Fatalf("negative quota %+v for %+v on %+v", q, show(in), shape)
		}
		// Memory is written as MiB<<20 bytes: it must fit in an int64.
		if q.MemoryMiB > math.MaxInt64>>20 {
			t.Fatalf("memory %d MiB overflows a byte quantity (input %+v on %s)", q.MemoryMiB, show(in), shape.Type)
		}

		switch {
		case in.Count != nil:
			n := *in.Count
			if q.GPUs != n*shape.GPUs || q.Neuron != n*shape.Neuron || q.EFA != n*shape.EFA {
				t.Errorf("count %d on %s gave GPUs %d, Neuron %d, EFA %d; want %d × (%d, %d, %d)",
					n, shape.Type, q.GPUs, q.Neuron, q.EFA, n, shape.GPUs, shape.Neuron, shape.EFA)
			}
			if in.VCPU == nil && q.CPUMilli != n*shape.VCPU*1000 {
				t.Errorf("count %d on %s gave %d mCPU, want %d", n, shape.Type, q.CPUMilli, n*shape.VCPU*1000)
			}
			if in.VCPU == nil && in.MemoryGiB == nil && q.MemoryMiB != n*shape.MemoryGiB*1024 {
				t.Errorf("count %d on %s gave %d MiB, want %d", n, shape.Type, q.MemoryMiB, n*shape.MemoryGiB*1024)
			}
		case in.GPUs != nil:
			if q.GPUs != *in.GPUs || q.Neuron != 0 {
				t.Errorf("GPUs %d on %s gave GPUs %d, Neuron %d", *in.GPUs, shape.Type, q.GPUs, q.Neuron)
			}
		case in.Neuron != nil:
			if q.Neuron != *in.Neuron || q.GPUs != 0 {
				t.Errorf("Neuron %d on %s gave Neuron %d, GPUs %d", *in.Neuron, shape.Type, q.Neuron, q.GPUs)
			}
		default:
			if q.GPUs != 0 || q.Neuron != 0 {
				t.Errorf("no devices asked on %s, got GPUs %d, Neuron %d", shape.Type, q.GPUs, q.Neuron)
			}
		}
		if in.VCPU != nil && q.CPUMilli != *in.VCPU*1000 {
			t.Errorf("given %d vCPU, got %d mCPU", *in.VCPU, q.CPUMilli)
		}
		if in.MemoryGiB != nil && q.MemoryMiB != *in.MemoryGiB*1024 {
			t.Errorf("given %d GiB, got %d MiB", *in.MemoryGiB, q.MemoryMiB)
		}

		// One more GPU, Neuron device or vCPU never derives less of anything.
		if in.Count == nil && (in.GPUs != nil || in.Neuron != nil || in.VCPU != nil) {
			more := in
			switch {
			case in.GPUs != nil:
				more.GPUs = i64(*in.GPUs + 1)
			case in.Neuron != nil:
				more.Neuron = i64(*in.Neuron + 1)
			default:
				more.VCPU = i64(*in.VCPU + 1)
			}
			m := domain.DeriveQuota(more, shape)
			if m.GPUs < q.GPUs || m.Neuron < q.Neuron || m.EFA < q.EFA || m.CPUMilli < q.CPUMilli || m.MemoryMiB < q.MemoryMiB {
				t.Errorf("one more device derived less: %+v then %+v (input %+v on %s)", q, m, show(more), shape.Type)
			}
		}
	})
}

func i64(v int64) *int64 { return &v }

// show prints a QuotaInput with its pointers followed.
func show(in domain.QuotaInput) map[string]any {
	out := map[string]any{"instanceType": in.InstanceType}
	for k, p := range map[string]*int64{"count": in.Count, "gpus": in.GPUs, "neuron": in.Neuron, "vcpu": in.VCPU, "memoryGiB": in.MemoryGiB} {
		if p != nil {
			out[k] = *p
		}
	}
	return out
}
