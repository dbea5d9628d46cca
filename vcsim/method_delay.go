// Per-method delays: how long vCenter takes to answer a call, for benchmarks that need
// realistic operation times (benchmarks/engine: a provider host's concurrency is only visible
// when each operation blocks for a while).
//
// govmomi's simulator has the knob (simulator.DelayConfig: Delay, MethodDelay, DelayJitter,
// simulator/model.go); it sleeps before taking the object's lock (simulator/simulator.go, `call`),
// so calls delayed together overlap, as calls to a real vCenter do. Upstream vcsim exposes only
// the whole-service delay (-delay); this flag sets the per-method map.
package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/simulator"
)

var methodDelayFlag = flag.String("method-delay", "",
	"comma-separated METHOD=MILLISECONDS, e.g. QueryOptions=500: each call of that SOAP method "+
		"waits so long before it is served (govmomi simulator.DelayConfig.MethodDelay)")

// parseMethodDelay reads "QueryOptions=500,UpdateOptions=250".
func parseMethodDelay(text string) (map[string]int, error) {
	delays := map[string]int{}
	for _, item := range splitList(text) {
		name, value, ok := strings.Cut(item, "=")
		ms, err := strconv.Atoi(strings.TrimSpace(value))
		if !ok || err != nil || ms < 0 || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("-method-delay: %q is not METHOD=MILLISECONDS", item)
		}
		delays[strings.TrimSpace(name)] = ms
	}
	return delays, nil
}

// applyMethodDelay puts the flag's delays into the model before it is created.
func applyMethodDelay(model *simulator.Model) error {
	delays, err := parseMethodDelay(*methodDelayFlag)
	if err != nil {
		return err
	}
	if len(delays) > 0 {
		model.DelayConfig.MethodDelay = delays
	}
	return nil
}
