package api

import "time"

// ObjectMeta is carried by every object a daemon keeps in its KV bucket.
//
// Generation is bumped on every spec change (by store.UpdateSpec); a reconciler copies the
// generation it acted on into its status's ObservedGeneration.
type ObjectMeta struct {
	Name              string     `json:"name"`
	Generation        int64      `json:"generation"`
	CreationTimestamp time.Time  `json:"creationTimestamp"`
	DeletionTimestamp *time.Time `json:"deletionTimestamp,omitempty"`
}

// Meta returns the object's metadata; it makes every type embedding ObjectMeta an Object.
func (m *ObjectMeta) Meta() *ObjectMeta { return m }

// Object is anything with ObjectMeta.
type Object interface{ Meta() *ObjectMeta }

// ConditionStatus is "True", "False" or "Unknown".
type ConditionStatus string

const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is one observation of an object's state, HyperShift and Kubernetes style.
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
	ObservedGeneration int64           `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time       `json:"lastTransitionTime"`
}

// Conditions is a list of conditions, at most one per type.
type Conditions []Condition

// Get returns the condition of that type, if present.
func (cs Conditions) Get(t string) (Condition, bool) {
	for _, c := range cs {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue reports whether the condition of that type is present and True.
func (cs Conditions) IsTrue(t string) bool {
	c, ok := cs.Get(t)
	return ok && c.Status == ConditionTrue
}

// Set adds or replaces the condition of c.Type. LastTransitionTime changes only when the
// status changes (or is new); it reports whether anything changed.
func (cs *Conditions) Set(c Condition, now time.Time) bool {
	for i, old := range *cs {
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		if old == c {
			return false
		}
		(*cs)[i] = c
		return true
	}
	c.LastTransitionTime = now
	*cs = append(*cs, c)
	return true
}
