package host

import (
	"slices"
	"strings"
)

// StopOrder orders the services that depend on name, directly or through
// others, as DependentServices returns them: each before every service it
// depends on, ties broken by name so the order is stable. dependsOn maps
// each service to the names it depends on; names compare
// case-insensitively, and load-order groups ("+group") are not services
// and are ignored. A dependency cycle (the SCM refuses to create one) does
// not loop: its members come in name order.
//
// It is the one implementation of the order for every platform that
// computes dependents from the services' configurations (the simulation,
// and the Win32 backend, since Wine's EnumDependentServices reports none).
func StopOrder(name string, dependsOn map[string][]string) []string {
	// Reverse edges: who depends on whom, keyed lower-case.
	names := map[string]string{} // lower-case -> as configured
	dependents := map[string][]string{}
	for svc, deps := range dependsOn {
		names[strings.ToLower(svc)] = svc
		for _, d := range deps {
			if d == "" || strings.HasPrefix(d, "+") {
				continue
			}
			dependents[strings.ToLower(d)] = append(dependents[strings.ToLower(d)], strings.ToLower(svc))
		}
	}
	// Everything that reaches name through dependencies.
	self := strings.ToLower(name)
	in := map[string]bool{}
	queue := []string{self}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, d := range dependents[cur] {
			if d != self && !in[d] {
				in[d] = true
				queue = append(queue, d)
			}
		}
	}
	// Kahn's algorithm over that set: a service is ready once every
	// service in the set that depends on it has been placed.
	waiting := map[string]int{}
	for s := range in {
		for _, d := range dependents[s] {
			if in[d] {
				waiting[s]++
			}
		}
	}
	var order []string
	for len(in) > 0 {
		var ready []string
		for s := range in {
			if waiting[s] == 0 {
				ready = append(ready, s)
			}
		}
		if len(ready) == 0 { // a cycle: take the rest by name
			for s := range in {
				ready = append(ready, s)
			}
		}
		slices.Sort(ready)
		next := ready[0]
		delete(in, next)
		order = append(order, names[next])
		for _, dep := range dependsOn[names[next]] {
			waiting[strings.ToLower(dep)]--
		}
	}
	return order
}
