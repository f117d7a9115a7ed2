package localcloud

import "github.com/prometheus/client_golang/prometheus"

// machinesDesc is the localcloud_machines gauge: machines by cluster and state.
var machinesDesc = prometheus.NewDesc("localcloud_machines", "Machines of the local cloud by cluster and state.",
	[]string{"cluster", "state"}, nil)

// collector reports the machines' states on every scrape of /metrics.
type collector struct{ c *Cloud }

func (collector) Describe(ch chan<- *prometheus.Desc) { ch <- machinesDesc }

func (k collector) Collect(ch chan<- prometheus.Metric) {
	type cs struct{ cluster, state string }
	counts := map[cs]int{}
	k.c.mu.Lock()
	ms := make([]*machine, 0, len(k.c.machines))
	for _, m := range k.c.machines {
		ms = append(ms, m)
	}
	k.c.mu.Unlock()
	for _, m := range ms {
		counts[cs{m.cluster, m.status().State}]++
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(machinesDesc, prometheus.GaugeValue, float64(n), key.cluster, key.state)
	}
}
