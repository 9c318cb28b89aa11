package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Approval says when a planned change may be applied.
// +kubebuilder:validation:Enum=Auto;Manual
type Approval string

const (
	// ApprovalAuto applies every plan at once.
	ApprovalAuto Approval = "Auto"
	// ApprovalManual applies a plan only once an admin approved its hash
	// (annotation wsu.dev/approved-plan, or `wsu approve`).
	ApprovalManual Approval = "Manual"
)

// DriftPolicy says what the periodic plan of a joined instance does with
// changes it finds.
// +kubebuilder:validation:Enum=Report;Correct
type DriftPolicy string

const (
	// DriftReport sets the Drifted condition and an event.
	DriftReport DriftPolicy = "Report"
	// DriftCorrect also applies the plan (through approval when Manual).
	DriftCorrect DriftPolicy = "Correct"
)

// Annotations and labels the controller reads and writes.
const (
	// ApprovedPlanAnnotation holds the plan hash an admin approved.
	ApprovedPlanAnnotation = "wsu.dev/approved-plan"
	// ForgetAnnotation set to "true" removes an instance whose host is gone
	// for good without running the remove playbook on it (the Node is
	// still deleted).
	ForgetAnnotation = "wsu.dev/forget"
	// SourceLabel says where an instance comes from: "configmap" for an
	// entry of the BYOH windows-instances ConfigMap, "machine" for a
	// Machine API Machine.
	SourceLabel = "wsu.dev/source"
	// SourceConfigMap is SourceLabel's value for BYOH entries.
	SourceConfigMap = "configmap"
	// SourceMachine is SourceLabel's value for the instances made from
	// OpenShift Machine API Machines.
	SourceMachine = "machine"
	// Finalizer keeps a deleted instance until its host is deconfigured.
	Finalizer = "wsu.dev/deconfigure"
)

// SecretKeyRef names a key of a Secret in the instance's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	Name string `json:"name"`
	// Key in the Secret's data.
	Key string `json:"key"`
}

// PlaybookSource is the playbook an instance is joined with: a stock one
// (join) or a site playbook kept in a ConfigMap with its templates.
type PlaybookSource struct {
	// Stock names a playbook built into wsu (`wsu playbooks list`).
	// +optional
	Stock string `json:"stock,omitempty"`
	// ConfigMap holds a site playbook: its key `playbook.hcl` is the root
	// playbook, other keys are files it reads (templates, included
	// playbooks) beside it.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
}

// VarSource is a ConfigMap or Secret whose keys are playbook variables (as
// a var file's); values from a Secret stay sensitive.
type VarSource struct {
	// ConfigMap names a ConfigMap in the instance's namespace.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`
	// Secret names a Secret in the instance's namespace.
	// +optional
	Secret string `json:"secret,omitempty"`
}

// WindowsInstanceSpec is the host and how to join it.
type WindowsInstanceSpec struct {
	// Address is the host's IPv4 address or DNS name, as a BYOH
	// windows-instances ConfigMap key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Address string `json:"address"`
	// Username is the account wsu logs in as (SSH).
	// +kubebuilder:validation:MinLength=1
	Username string `json:"username"`
	// KeySecretRef is the SSH private key the host accepts. Default: the
	// Secret cloud-private-key, key private-key.pem, as WMCO.
	// +optional
	KeySecretRef *SecretKeyRef `json:"keySecretRef,omitempty"`
	// Playbook joins the host. Default: the stock join.
	// +optional
	Playbook PlaybookSource `json:"playbook,omitempty"`
	// Vars are playbook variables (-var), as strings; HCL values such as
	// numbers and lists are written as in a var file. The variables that
	// say which Node the host may touch (ControllerVars: node_owner,
	// node_uid, node_registered, adopt_node) are the controller's.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['node_owner', 'node_uid', 'node_registered', 'adopt_node']))",message="vars may not set node_owner, node_uid, node_registered or adopt_node: the controller decides which Node an instance owns"
	// +optional
	Vars map[string]string `json:"vars,omitempty"`
	// VarsFrom are ConfigMaps and Secrets of playbook variables, applied in
	// order before Vars.
	// +optional
	VarsFrom []VarSource `json:"varsFrom,omitempty"`
	// HostVars are inventory variables for this host (an Ansible host_vars
	// entry), limited to the connection settings InstanceHostVars lists:
	// ansible_port, ansible_user, timeouts, and proxy_jump naming one of the controller's
	// --allowed-jump-hosts. The connection, the key, the known_hosts file,
	// the host key and the agent are the controller's (an admin sets other
	// variables with its --host-var).
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['ansible_port', 'ansible_ssh_port', 'ansible_user', 'ansible_ssh_user', 'connect_timeout', 'ansible_timeout', 'connect_retry_window', 'auth_retry_window', 'reconnect_timeout', 'keepalive_interval', 'keepalive_count_max', 'op_timeout', 'ansible_winrm_read_timeout_sec', 'ansible_winrm_operation_timeout_sec', 'proxy_jump'])",message="hostVars may set only ansible_port, ansible_ssh_port, ansible_user, ansible_ssh_user, connect_timeout, ansible_timeout, connect_retry_window, auth_retry_window, reconnect_timeout, keepalive_interval, keepalive_count_max, op_timeout, ansible_winrm_read_timeout_sec, ansible_winrm_operation_timeout_sec and proxy_jump; the controller decides the connection, key, host key, known_hosts file and agent"
	// +optional
	HostVars map[string]string `json:"hostVars,omitempty"`
	// Approval says when a planned change is applied. Default: Auto.
	// +kubebuilder:default=Auto
	// +optional
	Approval Approval `json:"approval,omitempty"`
	// DriftPolicy says what a periodic plan that finds changes does.
	// Default: Report.
	// +kubebuilder:default=Report
	// +optional
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`
	// Paused stops every run on this instance (status is kept).
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// InstanceHostVars are the inventory variables a WindowsInstance's
// spec.hostVars may set: where and how long to connect, never what runs or
// what is trusted. Ansible's names only: wsu's short ones (port, user)
// would also set a playbook variable of that name. The CRD's rule on
// hostVars lists the same names
// (api_test.go checks), and the controller refuses others too. proxy_jump
// must also name one of the controller's allowed jump hosts, which only the
// controller can check.
func InstanceHostVars() []string {
	return []string{
		"ansible_port", "ansible_ssh_port", "ansible_user", "ansible_ssh_user",
		"connect_timeout", "ansible_timeout", "connect_retry_window", "auth_retry_window",
		"reconnect_timeout", "keepalive_interval", "keepalive_count_max", "op_timeout",
		"ansible_winrm_read_timeout_sec", "ansible_winrm_operation_timeout_sec",
		JumpHostVar,
	}
}

// ControllerVars are the playbook variables only the controller sets: who
// owns the instance's Node (node_owner, its wsu.dev/owner annotation), the
// Node's UID recorded at join (node_uid), whether the host ever
// registered one (node_registered), and adopt_node, which an instance
// never gets (an admin re-marks a Node by hand: docs/install.md). The
// CRD's rule on vars lists the same names (types_test.go checks); the
// controller refuses them in varsFrom too.
func ControllerVars() []string {
	return []string{"node_owner", "node_uid", "node_registered", "adopt_node"}
}

// JumpHostVar is the host variable naming a jump host (bastion).
const JumpHostVar = "proxy_jump"

// Condition types of a WindowsInstance.
const (
	// ConditionReachable: the last run connected to the host.
	ConditionReachable = "Reachable"
	// ConditionPlanned: the last plan is recorded in status.lastPlan.
	ConditionPlanned = "Planned"
	// ConditionJoined: the join playbook applied without error.
	ConditionJoined = "Joined"
	// ConditionNodeReady: the instance's Node reports Ready.
	ConditionNodeReady = "NodeReady"
	// ConditionUpToDate: the Node runs the payload version the controller
	// carries.
	ConditionUpToDate = "UpToDate"
	// ConditionDrifted: a periodic plan found changes on a joined host.
	ConditionDrifted = "Drifted"
	// ConditionDegraded: the last run failed; see its reason and message.
	ConditionDegraded = "Degraded"
	// ConditionValid: False when the spec asks for something the
	// controller refuses (reason HostVarRefused: spec.hostVars sets a
	// variable an instance may not set); no run happens until it is fixed.
	ConditionValid = "Valid"
	// ConditionKeyRotated: the host accepts the key in use
	// (status.identity.keyFingerprint); False while a new key in the key
	// Secret (KEY.new) waits for rotate-key on this host.
	ConditionKeyRotated = "KeyRotated"
	// ConditionConfigMapEntryValid: False while the BYOH ConfigMap entry
	// an instance was made from does not parse (reason InvalidEntry); the
	// instance keeps its last good spec and is not removed. Absent while
	// the entry is good, and on instances not made from the ConfigMap.
	ConditionConfigMapEntryValid = "ConfigMapEntryValid"
	// ConditionConfigMapManaged: False while WMCO's operator runs against
	// the BYOH ConfigMap an instance was made from (reason WMCORunning):
	// wsu then creates, changes and removes no instance of that ConfigMap
	// and runs nothing on their hosts (phase Paused). Absent otherwise.
	ConditionConfigMapManaged = "ConfigMapManaged"
)

// Phases summarise the conditions for `kubectl get`.
const (
	PhasePending          = "Pending"
	PhaseAwaitingApproval = "AwaitingApproval"
	PhaseJoining          = "Joining"
	PhaseJoined           = "Joined"
	PhaseUpgrading        = "Upgrading"
	PhaseRemoving         = "Removing"
	PhaseFailed           = "Failed"
	PhasePaused           = "Paused"
)

// Identity is what the last run learned of the host from its facts.
type Identity struct {
	// Hostname the host reports.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// Addresses the host reports (IPv4).
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// HostKey is the host's SSH key (authorized_keys format), trusted on
	// first use and required from then on.
	// +optional
	HostKey string `json:"hostKey,omitempty"`
	// HostKeySHA256 is HostKey's fingerprint (SHA256:...).
	// +optional
	HostKeySHA256 string `json:"hostKeySHA256,omitempty"`
	// KeyFingerprint is the SHA256 fingerprint of the SSH private key the
	// controller logs in with: the key Secret's KEY, or KEY.new once
	// rotate-key moved the host to it.
	// +optional
	KeyFingerprint string `json:"keyFingerprint,omitempty"`
}

// PlanSummary is the last plan made for the instance.
type PlanSummary struct {
	// Hash identifies the plan: approve exactly this value.
	Hash string `json:"hash"`
	// Playbook that was planned.
	Playbook string `json:"playbook"`
	// Add, Change, Destroy and Run count the planned changes by kind.
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	Run     int `json:"run"`
	// Tasks lists the addresses of the tasks that would change (at most
	// 50).
	// +optional
	Tasks []string `json:"tasks,omitempty"`
	// Time this plan was first made: a later pass that makes the same plan
	// leaves it (and the status) unwritten.
	Time metav1.Time `json:"time"`
	// ClusterSettings is the version of the cluster settings this plan
	// saw (a hash of the watched sources' resource versions: kubelet CA,
	// Proxy, image mirror sets, trusted CA): a change plans the instance
	// again at once.
	// +optional
	ClusterSettings string `json:"clusterSettings,omitempty"`
}

// RunSummary is the last apply.
type RunSummary struct {
	// Playbook that was applied.
	Playbook string `json:"playbook"`
	// Result is Succeeded, Failed or Unreachable.
	Result string `json:"result"`
	// Changed counts the tasks that changed something.
	Changed int `json:"changed"`
	// Time the run ended.
	Time metav1.Time `json:"time"`
}

// WindowsInstanceStatus is what the controller observed.
type WindowsInstanceStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the conditions.
	// +optional
	Phase string `json:"phase,omitempty"`
	// Conditions: Reachable, Planned, Joined, NodeReady, UpToDate, Drifted,
	// Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// NodeName is the Node the host registered as.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// NodeUID is that Node's UID, recorded when the controller first saw
	// it marked as this instance's (annotation wsu.dev/owner). Cordon,
	// drain, upgrade, remove and delete act only on the Node with this
	// UID; an instance without one never touches a Node.
	// +optional
	NodeUID string `json:"nodeUID,omitempty"`
	// Identity is what the host reported of itself.
	// +optional
	Identity Identity `json:"identity,omitempty"`
	// AppliedVersion is the payload version last applied.
	// +optional
	AppliedVersion string `json:"appliedVersion,omitempty"`
	// LastPlan is the last plan made.
	// +optional
	LastPlan *PlanSummary `json:"lastPlan,omitempty"`
	// LastApply is the last apply.
	// +optional
	LastApply *RunSummary `json:"lastApply,omitempty"`
	// Failures counts consecutive failed runs; it resets on success.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// NextRetry is when a failed instance is tried again.
	// +optional
	NextRetry *metav1.Time `json:"nextRetry,omitempty"`
	// ClusterSettings is the version of the cluster settings (as
	// lastPlan.clusterSettings) the host was last found in line with or
	// brought in line with: while the cluster's differs, a plan with
	// changes is a settings push, applied under the approval mode and the
	// rollout limit whatever the drift policy.
	// +optional
	ClusterSettings string `json:"clusterSettings,omitempty"`
}

// WindowsInstance is a Windows host wsu joins to the cluster and keeps
// joined.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wi;winst,categories=wsu
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="NodeReady")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.appliedVersion`
// +kubebuilder:printcolumn:name="Drifted",type=string,JSONPath=`.status.conditions[?(@.type=="Drifted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WindowsInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WindowsInstanceSpec   `json:"spec,omitempty"`
	Status WindowsInstanceStatus `json:"status,omitempty"`
}

// WindowsInstanceList is a list of WindowsInstances.
//
// +kubebuilder:object:root=true
type WindowsInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WindowsInstance `json:"items"`
}
