package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/kube"
)

func (a *app) approveCommand() *cobra.Command {
	var namespace, kubeconfig, kubeContext, plan string
	cmd := &cobra.Command{
		Use:   "approve INSTANCE",
		Short: "Approve a WindowsInstance's plan (approval: Manual)",
		Long: `Approve shows a WindowsInstance's last plan; with --plan HASH it approves exactly that
plan, which the controller then applies if a fresh plan still has that hash. A hash
that is not the instance's last plan is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := kube.Load(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			scheme, err := approval.NewScheme()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme})
			if err != nil {
				return err
			}
			key := client.ObjectKey{Namespace: namespace, Name: args[0]}
			if plan == "" {
				return a.showPlan(cmd.Context(), c, key)
			}
			if err := approval.Approve(cmd.Context(), c, key, plan); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Approved plan %s of %s.\n", plan, key)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", approval.DefaultNamespace, "namespace of the WindowsInstance")
	f.StringVar(&plan, "plan", "", "the plan hash to approve (status.lastPlan.hash)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig (default: KUBECONFIG, in-cluster, ~/.kube/config)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context")
	return cmd
}

// showPlan prints an instance's last plan and how to approve it.
func (a *app) showPlan(ctx context.Context, c client.Client, key client.ObjectKey) error {
	wi := &wsuv1.WindowsInstance{}
	if err := c.Get(ctx, key, wi); err != nil {
		return err
	}
	p := wi.Status.LastPlan
	if p == nil {
		return fmt.Errorf("WindowsInstance %s has no plan yet", key)
	}
	fmt.Fprintf(a.stdout, "Plan %s of %s (%s, %s): %s.\n", p.Hash, key, p.Playbook, p.Time.UTC().Format("2006-01-02 15:04:05Z"), approval.Summary(p))
	text, err := approval.ReadPlanText(ctx, c, key, p.Hash)
	if err != nil {
		return err
	}
	if text != "" {
		// The whole plan as the controller kept it (wsu-plan-NAME).
		fmt.Fprintf(a.stdout, "\n%s\n", strings.TrimRight(text, "\n"))
	} else {
		for _, t := range p.Tasks {
			fmt.Fprintf(a.stdout, "  %s\n", t)
		}
	}
	fmt.Fprintf(a.stdout, "Approve exactly it with: wsu approve %s -n %s --plan %s\n", key.Name, key.Namespace, p.Hash)
	return nil
}
