package main

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/payload"
)

func (a *app) payloadCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "payload",
		Short: "Check and fetch the Windows node payload (kubelet, kube-proxy, CNI...)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "verify DIR",
		Short: "Check every file of a payload directory against its manifest.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := payload.Load(args[0])
			if err != nil {
				return err
			}
			problems, err := payload.Verify(args[0], m)
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintf(a.stderr, "%s\n", p)
			}
			if len(problems) > 0 {
				fmt.Fprintf(a.stderr, "%d of %d components do not match the manifest; `wsu payload fetch %s` downloads them.\n", len(problems), len(m.Components), args[0])
				return exitError{1}
			}
			fmt.Fprintf(a.stdout, "payload %s: %d components verified\n", m.Version, len(m.Components))
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "copy SRC DEST",
		Short: "Copy a payload directory, keeping only files whose sha256 matches its manifest (a payload image's init container)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := payload.Load(args[0])
			if err != nil {
				return err
			}
			if err := payload.Copy(args[0], args[1], m); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "payload %s: %d components verified and copied to %s\n", m.Version, len(m.Components), args[1])
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "fetch DIR",
		Short: "Download missing or wrong payload files from the manifest's sources, checking sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := payload.Load(args[0])
			if err != nil {
				return err
			}
			last := map[string]int64{}
			err = payload.Fetch(cmd.Context(), http.DefaultClient, args[0], m, func(c string, done, total int64) {
				// One line per 10% (or per 16 MiB when the size is unknown).
				step := int64(16 << 20)
				if total > 0 {
					step = max(total/10, 1)
				}
				if done/step != last[c]/step || done == total {
					if total > 0 {
						fmt.Fprintf(a.stdout, "%s: %d%% (%d/%d bytes)\n", c, done*100/total, done, total)
					} else {
						fmt.Fprintf(a.stdout, "%s: %d bytes\n", c, done)
					}
				}
				last[c] = done
			})
			if err != nil {
				return err
			}
			names := m.Names()
			sort.Strings(names)
			fmt.Fprintf(a.stdout, "payload %s: complete and verified (%d components)\n", m.Version, len(names))
			return nil
		},
	})
	return cmd
}
