package sandbox

import (
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/openquota/console/internal/domain"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// GPUUtilAnnotation pins the utilization (0-100) the fake exporter reports for
// a pod's GPUs; without it a pod is busy or idle by a hash of its UID.
const GPUUtilAnnotation = "sandbox.openquota.dev/gpu-util"

// dcgmCollector reports, for every GPU of every Ready fake node, the series
// dcgm-exporter reports on a real cluster, with the same names and labels:
// GPUs held by a running pod carry its namespace, pod and container.
type dcgmCollector struct {
	nodes corelisters.NodeLister
	pods  corelisters.PodLister
	now   func() time.Time
}

// dcgmLabels are dcgm-exporter's; GPU_I_PROFILE and GPU_I_ID name a MIG
// partition (empty, so absent, for a whole GPU).
var dcgmLabels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
	"container", "namespace", "pod", "GPU_I_PROFILE", "GPU_I_ID"}

var dcgmMetrics = map[string]*prometheus.Desc{
	"DCGM_FI_DEV_GPU_UTIL":          prometheus.NewDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", dcgmLabels, nil),
	"DCGM_FI_DEV_MEM_COPY_UTIL":     prometheus.NewDesc("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", dcgmLabels, nil),
	"DCGM_FI_DEV_FB_USED":           prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", dcgmLabels, nil),
	"DCGM_FI_DEV_FB_FREE":           prometheus.NewDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", dcgmLabels, nil),
	"DCGM_FI_DEV_GPU_TEMP":          prometheus.NewDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", dcgmLabels, nil),
	"DCGM_FI_DEV_POWER_USAGE":       prometheus.NewDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", dcgmLabels, nil),
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE": prometheus.NewDesc("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", dcgmLabels, nil),
}

func (c *dcgmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range dcgmMetrics {
		ch <- d
	}
}

type gpuHolder struct{ namespace, pod, container, uid, utilPin string }

func (c *dcgmCollector) Collect(ch chan<- prometheus.Metric) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	// GPUs are handed out per node in pod start order, one index per device.
	byNode := map[string][]*corev1.Pod{}
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
		}
	}
	now := c.now()
	for _, n := range nodes {
		gpus := n.Status.Capacity[ResourceGPU]
		partitions := migInstances(n)
		if (gpus.Value() == 0 && len(partitions) == 0) || !nodeReady(n) {
			continue
		}
		holders := make([]gpuHolder, gpus.Value())
		nodePods := byNode[n.Name]
		sort.Slice(nodePods, func(i, j int) bool {
			a, b := nodePods[i], nodePods[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Name < b.Name
		})
		next := 0
		for _, p := range nodePods {
			for _, ctr := range p.Spec.Containers {
				q := ctr.Resources.Limits[ResourceGPU]
				if q.IsZero() {
					q = ctr.Resources.Requests[ResourceGPU]
				}
				for k := int64(0); k < q.Value() && next < len(holders); k++ {
					holders[next] = gpuHolder{p.Namespace, p.Name, ctr.Name, string(p.UID), p.Annotations[GPUUtilAnnotation]}
					next++
				}
			}
		}
		// MIG partitions are handed out the same way, per profile.
		for _, p := range nodePods {
			for _, ctr := range p.Spec.Containers {
				for k := range partitions {
					mi := &partitions[k]
					if mi.holder.pod != "" {
						continue
					}
					q := ctr.Resources.Limits[domain.PartitionResource(mi.profile)]
					if q.IsZero() {
						q = ctr.Resources.Requests[domain.PartitionResource(mi.profile)]
					}
					if q.Value() > int64(claimed(partitions, mi.profile, string(p.UID), ctr.Name)) {
						mi.holder = gpuHolder{p.Namespace, p.Name, ctr.Name, string(p.UID), p.Annotations[GPUUtilAnnotation]}
					}
				}
			}
		}
		// dcgm-exporter reports the marketing name, with spaces where the label has dashes.
		model := strings.ReplaceAll(n.Labels["nvidia.com/gpu.product"], "-", " ")
		memMiB, _ := strconv.ParseFloat(n.Labels["nvidia.com/gpu.memory"], 64)
		type device struct {
			gpu              int
			holder           gpuHolder
			profile, id      string
			memMiB, instance float64
		}
		var devices []device
		for i, h := range holders {
			devices = append(devices, device{gpu: i, holder: h, memMiB: memMiB, instance: float64(i)})
		}
		for _, mi := range partitions {
			devices = append(devices, device{gpu: mi.gpu, holder: mi.holder, profile: strings.TrimPrefix(mi.profile, "mig-"),
				id: strconv.Itoa(mi.id), memMiB: mi.memMiB, instance: float64(mi.gpu*10 + mi.id)})
		}
		for _, d := range devices {
			i, h := d.gpu, d.holder
			util := gpuUtil(h, n.Name, int(d.instance), now)
			used := 0.0
			if h.pod != "" {
				used = math.Round(d.memMiB * (0.15 + 0.8*util/100))
			}
			memMiB := d.memMiB
			lv := []string{
				strconv.Itoa(i), fakeUUID(n.Name, i), fmt.Sprintf("00000000:%02X:00.0", 0x10+i), "nvidia" + strconv.Itoa(i),
				model, n.Name, "550.127.05", h.container, h.namespace, h.pod, d.profile, d.id,
			}
			emit := func(name string, v float64) {
				ch <- prometheus.MustNewConstMetric(dcgmMetrics[name], prometheus.GaugeValue, v, lv...)
			}
			emit("DCGM_FI_DEV_GPU_UTIL", util)
			emit("DCGM_FI_DEV_MEM_COPY_UTIL", math.Round(util*0.6))
			emit("DCGM_FI_DEV_FB_USED", used)
			emit("DCGM_FI_DEV_FB_FREE", memMiB-used)
			emit("DCGM_FI_DEV_GPU_TEMP", math.Round(32+util*0.45))
			emit("DCGM_FI_DEV_POWER_USAGE", math.Round(70+util*6.3))
			emit("DCGM_FI_PROF_GR_ENGINE_ACTIVE", util/100)
		}
	}
}

// gpuUtil is deterministic per pod: about seven pods in ten keep their GPUs
// busy (60-98 %), the rest leave them nearly idle; a slow wave adds life.
func gpuUtil(h gpuHolder, node string, gpu int, now time.Time) float64 {
	if h.pod == "" {
		return 0
	}
	if h.utilPin != "" {
		if v, err := strconv.ParseFloat(h.utilPin, 64); err == nil {
			return math.Max(0, math.Min(100, v))
		}
	}
	seed := hash32(h.uid + "/" + node + "/" + strconv.Itoa(gpu))
	wave := math.Sin(float64(now.Unix())/90 + float64(seed%628)/100)
	if seed%10 < 7 {
		return math.Round(79 + 14*wave + float64(seed%5))
	}
	return math.Round(4 + 4*wave)
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

func fakeUUID(node string, gpu int) string {
	a, b := hash32(node), hash32(node+strconv.Itoa(gpu))
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%08x%04x", a, b>>16, b&0xffff, (a^b)&0xffff, a^(b<<3), gpu)
}

// migInstance is one MIG partition of a node: its GPU, its instance ID on
// that GPU, its profile and memory, and the pod holding it.
type migInstance struct {
	gpu, id int
	profile string
	memMiB  float64
	holder  gpuHolder
}

// migInstances lays a node's MIG partitions out on the GPUs after its whole
// ones, profile by profile (sorted), as many per GPU as fit its 7 slices.
func migInstances(n *corev1.Node) []migInstance {
	whole := n.Status.Capacity[ResourceGPU]
	gpu := int(whole.Value())
	var profiles []string
	for r := range n.Status.Capacity {
		if p, ok := domain.PartitionOf(r); ok {
			profiles = append(profiles, p)
		}
	}
	sort.Strings(profiles)
	var out []migInstance
	for _, p := range profiles {
		q := n.Status.Capacity[domain.PartitionResource(p)]
		slices, _ := domain.PartitionSlices(p)
		perGPU := int(7 / slices)
		mem := 0.0
		if m := migMemory.FindStringSubmatch(p); m != nil {
			gb, _ := strconv.ParseFloat(m[1], 64)
			mem = gb * 1024
		}
		for k := 0; k < int(q.Value()); k++ {
			out = append(out, migInstance{gpu: gpu + k/perGPU, id: k % perGPU, profile: p, memMiB: mem})
		}
		gpu += (int(q.Value()) + perGPU - 1) / perGPU
	}
	return out
}

var migMemory = regexp.MustCompile(`\.(\d+)gb`)

// claimed counts the partitions of profile a pod's container holds already.
func claimed(instances []migInstance, profile, podUID, container string) int {
	n := 0
	for _, mi := range instances {
		if mi.profile == profile && mi.holder.uid == podUID && mi.holder.container == container {
			n++
		}
	}
	return n
}
