package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/setup"
)

// knownHostsVar is the inventory variable naming a host's known_hosts
// file (transport/ssh).
const knownHostsVar = "ssh_known_hosts_file"

// jobRequest is req as a Job's pod receives it (request.json, from an
// annotation of the Job's pod template through a downwardAPI volume): the
// run's setup.Request, packed, so `wsu-controller run-job` makes exactly
// the run the in-process runner would. The files the controller holds (a
// site playbook, var files, known_hosts) travel by content; the secrets —
// the private key, a rotation's new key, the values of varsFrom Secrets —
// by reference, as items of the Secret volumes in mounts, which the
// request names (setup.SecretFiles): the request is part of the Job's
// spec, and setup.Request.Encode refuses any other secret.
func jobRequest(req Request) (setup.Request, *secretMounts, error) {
	sr, err := req.setup().Pack(knownHostsVar)
	if err != nil {
		return setup.Request{}, nil, err
	}
	// The pod's cluster is its own ServiceAccount's (in-cluster), never a
	// kubeconfig file of the controller's.
	sr.Kubeconfig, sr.KubeContext = "", ""
	if req.Secrets.Key.Secret == "" {
		return setup.Request{}, nil, errors.New("the run names no key Secret to mount")
	}
	mounts := &secretMounts{}
	sr.SecretFiles = setup.SecretFiles{HostVars: map[string]string{kubeinv.KeyVar: mounts.file(req.Secrets.Key, jobKeyFile)}}
	if req.Secrets.NewKey.Secret != "" {
		sr.SecretFiles.HostVars[kubeinv.NewKeyVar] = mounts.file(req.Secrets.NewKey, jobNewKeyFile)
	}
	for _, i := range slices.Sorted(maps.Keys(req.Secrets.Vars)) {
		if sr.SecretFiles.Vars == nil {
			sr.SecretFiles.Vars = map[int]string{}
		}
		sr.SecretFiles.Vars[i] = mounts.file(req.Secrets.Vars[i], fmt.Sprintf("var-%d", i))
	}
	return sr, mounts, nil
}

// secretMounts are the Secret volumes a Job mounts, by reference: one per
// Secret, with the items the run reads, under jobSecretsDir.
type secretMounts struct {
	volumes []corev1.Volume
}

// file mounts item as file and returns its path in the pod.
func (m *secretMounts) file(item SecretItem, file string) string {
	var vol *corev1.Volume
	for i := range m.volumes {
		if m.volumes[i].Secret.SecretName == item.Secret {
			vol = &m.volumes[i]
		}
	}
	if vol == nil {
		m.volumes = append(m.volumes, corev1.Volume{Name: fmt.Sprintf("wsu-secret-%d", len(m.volumes)),
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: item.Secret}}})
		vol = &m.volumes[len(m.volumes)-1]
	}
	vol.Secret.Items = append(vol.Secret.Items, corev1.KeyToPath{Key: item.Key, Path: file})
	return path.Join(jobSecretsDir, vol.Name, file)
}

// mountsFor are the volume mounts of the volumes.
func (m *secretMounts) mountsFor() []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, v := range m.volumes {
		out = append(out, corev1.VolumeMount{Name: v.Name, MountPath: path.Join(jobSecretsDir, v.Name), ReadOnly: true})
	}
	return out
}

// knownHostsFile is the known_hosts file the run's one host uses.
func knownHostsFile(inv *inventory.Inventory) string { return inv.HostString(knownHostsVar) }

// jobResult is what a Job's pod reports back in its termination message:
// Outcome without the plan itself (an apply sends its hash instead),
// and the known_hosts file after the run (a host key trusted on first
// use). It must stay within maxJobResult bytes.
type jobResult struct {
	Hash        string      `json:"hash,omitempty"`
	Add         int         `json:"add,omitempty"`
	Change      int         `json:"change,omitempty"`
	Destroy     int         `json:"destroy,omitempty"`
	Run         int         `json:"run,omitempty"`
	Changed     int         `json:"changed,omitempty"`
	Tasks       []string    `json:"tasks,omitempty"`
	MoreTasks   int         `json:"moreTasks,omitempty"`
	Facts       *host.Facts `json:"facts,omitempty"`
	Unreachable bool        `json:"unreachable,omitempty"`
	// LoginRefused is kept apart from Message, which may be cut short.
	LoginRefused bool   `json:"loginRefused,omitempty"`
	Failed       bool   `json:"failed,omitempty"`
	Message      string `json:"message,omitempty"`
	KnownHosts   string `json:"knownHosts,omitempty"`
}

// maxJobResult is the kubelet's bound on a termination message.
const maxJobResult = 4096

func resultOf(out Outcome, knownHosts string) jobResult {
	return jobResult{Hash: out.Hash, Add: out.Add, Change: out.Change, Destroy: out.Destroy, Run: out.Run, Changed: out.Changed,
		Tasks: out.Tasks, Facts: out.Facts, Unreachable: out.Unreachable, LoginRefused: out.LoginRefused, Failed: out.Failed, Message: out.Message, KnownHosts: knownHosts}
}

// encodeResult is the result as compact JSON within maxJobResult: the
// message is cut first, then task addresses are dropped from the end
// (counted in MoreTasks).
func encodeResult(r jobResult) ([]byte, error) {
	r.Message = Truncate(r.Message, 1000)
	for {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(data) <= maxJobResult {
			return data, nil
		}
		if len(r.Tasks) == 0 {
			if len(r.Message) > 100 {
				r.Message = Truncate(r.Message, 100)
				continue
			}
			return nil, fmt.Errorf("the run's result is %d bytes, over %d even without its task list", len(data), maxJobResult)
		}
		drop := max(1, len(r.Tasks)/4)
		r.MoreTasks += drop
		r.Tasks = r.Tasks[:len(r.Tasks)-drop]
	}
}

func (r jobResult) outcome() Outcome {
	return Outcome{Hash: r.Hash, Add: r.Add, Change: r.Change, Destroy: r.Destroy, Run: r.Run, Changed: r.Changed,
		Tasks: r.Tasks, Facts: r.Facts, Unreachable: r.Unreachable, LoginRefused: r.LoginRefused, Failed: r.Failed, Message: r.Message}
}
