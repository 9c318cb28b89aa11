// Package userdata renders the user data a Windows Machine runs at its
// first boot so that wsu can reach it: what a MachineSet's userDataSecret
// holds (WMCO calls the Secret windows-user-data). The script installs and
// starts OpenSSH Server, authorises the one public key wsu logs in with for
// administrators, and opens TCP 22 in the firewall; nothing else, so an
// administrator can read every line before trusting it (`wsu user-data`
// prints it). Everything else a node needs is the join's, over SSH, where
// it is planned and shown.
//
// The script is in the `<powershell>` form that EC2Launch and
// cloudbase-init run, with `<persist>true</persist>` so it runs at every
// boot: the key it writes is always the current Secret's, and a machine
// whose sshd was reset is reachable again after a reboot.
package userdata

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Secret a MachineSet references, by WMCO's names.
const (
	SecretName = "windows-user-data"
	// SecretKey is the data key the Machine API reads user data from.
	SecretKey = "userData"
	// MachineAPINamespace is where OpenShift's Machine API looks for it.
	MachineAPINamespace = "openshift-machine-api"
)

// Well-known SIDs, so the ACL is right whatever the system's language
// (the group is "Administrateurs" on a French Windows).
const (
	administratorsSID = "S-1-5-32-544"
	systemSID         = "S-1-5-18"
)

// firewallRule names the inbound rule the script adds, so a re-run finds
// it instead of adding another.
const firewallRule = "wsu-sshd"

var script = template.Must(template.New("userdata").Parse(`<powershell>
$ErrorActionPreference = 'Stop'
# wsu: make this machine reachable over SSH with the cluster's key, and
# nothing else. The join configures the rest over SSH, planned and shown.

# 1. OpenSSH Server, started now and at every boot.
$capability = Get-WindowsCapability -Online | Where-Object Name -like 'OpenSSH.Server*'
if ($capability.State -ne 'Installed') { Add-WindowsCapability -Online -Name $capability.Name | Out-Null }
Set-Service -Name sshd -StartupType Automatic
Start-Service sshd

# 2. The one key wsu logs in with ({{.Fingerprint}}), for administrators.
#    sshd reads administrators_authorized_keys only when Administrators and
#    SYSTEM alone may access it: inheritance off, those two granted.
$keys = Join-Path $env:ProgramData 'ssh\administrators_authorized_keys'
Set-Content -Path $keys -Value '{{.AuthorizedKey}}' -Encoding ascii
icacls.exe $keys /inheritance:r /grant '*{{.AdministratorsSID}}:F' /grant '*{{.SystemSID}}:F' | Out-Null
if ($LASTEXITCODE -ne 0) { throw "icacls $keys failed: $LASTEXITCODE" }

# 3. TCP 22 open in the firewall.
if (-not (Get-NetFirewallRule -Name '{{.FirewallRule}}' -ErrorAction SilentlyContinue)) {
  New-NetFirewallRule -Name '{{.FirewallRule}}' -DisplayName 'OpenSSH Server (wsu)' -Enabled True -Direction Inbound -Protocol TCP -Action Allow -LocalPort 22 | Out-Null
}
Restart-Service sshd
</powershell>
<persist>true</persist>
`))

// Script is the user data that authorises pub.
func Script(pub ssh.PublicKey) string {
	var b bytes.Buffer
	// The authorized_keys line without a comment: type and base64 only,
	// so nothing in it can end the single-quoted PowerShell string.
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
	err := script.Execute(&b, map[string]string{
		"AuthorizedKey": line, "Fingerprint": ssh.FingerprintSHA256(pub),
		"AdministratorsSID": administratorsSID, "SystemSID": systemSID, "FirewallRule": firewallRule,
	})
	if err != nil {
		panic(err) // a fixed template over strings cannot fail
	}
	return b.String()
}

// ErrEncryptedKey: a private key with a passphrase; the controller's key
// Secret holds an unencrypted one.
var ErrEncryptedKey = errors.New("the private key is protected by a passphrase: give its public key (the .pub file) instead")

// PublicKey reads the key to authorise from a private key (PEM or OpenSSH
// format, what the key Secret holds) or an authorized_keys line (a .pub
// file).
func PublicKey(data []byte) (ssh.PublicKey, error) {
	if pub, _, _, _, err := ssh.ParseAuthorizedKey(data); err == nil {
		return pub, nil
	}
	signer, err := ssh.ParsePrivateKey(data)
	var missing *ssh.PassphraseMissingError
	switch {
	case errors.As(err, &missing):
		return nil, ErrEncryptedKey
	case err != nil:
		return nil, fmt.Errorf("neither a public key (an authorized_keys line) nor an SSH private key: %w", err)
	}
	return signer.PublicKey(), nil
}

// ClusterAPINamespace is where OpenShift runs the Cluster API, whose
// MachineSets reference the same Secret there.
const ClusterAPINamespace = "openshift-cluster-api"

// FingerprintAnnotation on the Secret names the key it authorises, so an
// admin sees which key a MachineSet's new machines will accept.
const FingerprintAnnotation = "wsu.dev/key-fingerprint"

// Secret is the windows-user-data Secret in namespace that authorises pub:
// what `wsu user-data --secret` prints and what the controller keeps
// current, the script as stringData so it reads as it runs.
func Secret(namespace string, pub ssh.PublicKey) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: SecretName, Namespace: namespace,
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "wsu"},
			Annotations: map[string]string{FingerprintAnnotation: ssh.FingerprintSHA256(pub)},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{SecretKey: Script(pub)},
	}
}
