// Package run is the controller's run face: one playbook run for one
// WindowsInstance (Request), carried out in the controller's process
// (InProcess) or as a Kubernetes Job from wsu's own image (JobRunner, with
// JobPod the side that runs inside the Job's pod), and what it reports back
// (Outcome).
//
// It is apart from the reconcilers (package controller) so each room shows
// one part: the reconcilers decide what to run and record it in status; this
// package only runs it, through package setup as `wsu apply` does, and owns
// the Job wire format (the request a pod receives, the result it writes).
// It needs controller-runtime's client, never its manager.
package run
