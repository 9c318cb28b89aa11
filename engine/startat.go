package engine

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine/playbook"
)

// startAt is Ansible's --start-at-task (Request.StartAt): the run begins at
// the first task, in run order (file order, includes where they are), whose
// name, or address as --list-tasks prints it (include.NAME.task["x"]),
// is the one given. Plays before its play do not run (play_not_run, "skipped:
// before --start-at-task"); in its play the tasks before it are skipped,
// which its play_start says. Handlers are not tasks to start at.
type startAt struct {
	name string
	// at is the play the run starts in, and index its first task run.
	at    playKey
	index int
	// before are the plays that do not run.
	before map[playKey]bool
}

// playKey is a play in one playbook instance (an included file may be
// included twice).
type playKey struct {
	inst *instance
	play *playbook.Play
}

// findStart resolves Request.StartAt before any host is touched; an
// unknown name is an error with the nearest task name. nil: no
// --start-at-task.
func (r *runner) findStart() (*startAt, hcl.Diagnostics) {
	want := r.req.StartAt
	if want == "" {
		return nil, nil
	}
	s := &startAt{name: want, before: map[playKey]bool{}}
	var names []string
	found := false
	var walk func(inst *instance)
	walk = func(inst *instance) {
		for _, it := range inst.pb.Items {
			if found {
				return
			}
			switch it := it.(type) {
			case *playbook.Play:
				k := playKey{inst, it}
				for i, t := range it.Tasks {
					names = append(names, t.Name)
					if t.Name == want || inst.path+fmt.Sprintf("task[%q]", t.Name) == want {
						s.at, s.index, found = k, i, true
						return
					}
				}
				s.before[k] = true
			case *playbook.Include:
				walk(inst.children[it.Name])
			}
		}
	}
	walk(r.root)
	if !found {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown task",
			Detail: fmt.Sprintf("--start-at-task %s: no task of the playbook is named so, nothing was run.%s A task is named by its name (\"wait for node\") or its address as --list-tasks prints it (include.join.task[\"wait for node\"]).", want, suggestName(strings.TrimSpace(want), names))}}
	}
	return s, nil
}

// skipsPlay reports whether --start-at-task skips the whole play.
func (s *startAt) skipsPlay(inst *instance, p *playbook.Play) bool {
	return s != nil && s.before[playKey{inst, p}]
}

// skipsTask reports whether --start-at-task skips the play's task i.
func (s *startAt) skipsTask(inst *instance, p *playbook.Play, i int) bool {
	return s != nil && (s.before[playKey{inst, p}] || (s.at == playKey{inst, p} && i < s.index))
}

// playNote is what a play's play_start says of --start-at-task: "" for
// plays it does not touch.
func (s *startAt) playNote(inst *instance, p *playbook.Play) string {
	if s == nil || s.at != (playKey{inst, p}) || s.index == 0 {
		return ""
	}
	return fmt.Sprintf("starting at task %q (--start-at-task): the %d %s before it skipped", p.Tasks[s.index].Name, s.index, map[bool]string{true: "task", false: "tasks"}[s.index == 1])
}
