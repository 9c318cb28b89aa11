// Package approval is what a client of the controller needs to review and
// approve a WindowsInstance's plan (`wsu approve`): the scheme of the
// controller's objects, the approval of a plan by its hash, and the plan's
// text the controller keeps.
//
// It is apart from package controller so the wsu CLI links none of the
// controller's manager: it needs only controller-runtime's client (no
// manager, no metrics filters, hence no k8s.io/apiserver), which keeps
// every CLI process small and quick to start (cmd/wsu's deps test).
package approval
