package observe

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hostplane/hostplane/pkg/api"
)

// Conditions exports the conditions of one kind of object (clusters, node pools) at scrape
// time as two gauges: how many objects have each condition type in each status, and, per
// object, 1 for the status each of its conditions has and 0 for the other two.
type Conditions struct {
	count, each *prometheus.Desc

	mu      sync.Mutex
	objects map[string]objectConditions // by object key
}

type objectConditions struct {
	labels []string // the values of the object's labels
	conds  api.Conditions
}

var conditionStatuses = []api.ConditionStatus{api.ConditionTrue, api.ConditionFalse, api.ConditionUnknown}

// NewConditions returns the collector of the gauges count, labelled condition and status, and
// each, labelled objectLabels then condition and status.
func NewConditions(count, each prometheus.GaugeOpts, objectLabels ...string) *Conditions {
	desc := func(o prometheus.GaugeOpts, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(o.Namespace, o.Subsystem, o.Name), o.Help, labels, o.ConstLabels)
	}
	return &Conditions{
		count:   desc(count, "condition", "status"),
		each:    desc(each, slices.Concat(objectLabels, []string{"condition", "status"})...),
		objects: map[string]objectConditions{},
	}
}

// Set records the conditions of the object key, whose labels have the values labelValues.
func (c *Conditions) Set(key string, conds api.Conditions, labelValues ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects[key] = objectConditions{labels: slices.Clone(labelValues), conds: slices.Clone(conds)}
}

// Forget drops the object key's series.
func (c *Conditions) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.objects, key)
}

// Describe implements prometheus.Collector.
func (c *Conditions) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.each
}

// Collect implements prometheus.Collector. Every status of a condition type in use is
// counted, zero included, so a series does not vanish when its last object moves on.
func (c *Conditions) Collect(ch chan<- prometheus.Metric) {
	type key struct{ condition, status string }
	counts := map[key]int{}
	c.mu.Lock()
	for _, o := range c.objects {
		for _, cond := range o.conds {
			for _, s := range conditionStatuses {
				v := 0.0
				if cond.Status == s {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(c.each, prometheus.GaugeValue, v, slices.Concat(o.labels, []string{cond.Type, string(s)})...)
				counts[key{cond.Type, string(s)}] += 0
			}
			counts[key{cond.Type, string(cond.Status)}]++
		}
	}
	c.mu.Unlock()
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.condition, k.status)
	}
}

var _ prometheus.Collector = (*Conditions)(nil)
