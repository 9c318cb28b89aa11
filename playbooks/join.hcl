# join: make Windows hosts Kubernetes/OpenShift workers. The step
# playbooks composed (preflight first), with CSR approval (only CSRs that pass every rule),
# the wait for Ready and the node's version annotation.
#
#   wsu apply join -i inventory.ini -var payload_dir=/srv/payload
#
# A site playbook can include this file (source = "wsu:join.hcl") with its
# own variables and add plays before or after it.

variable "cluster_flavour" {
  type        = string
  default     = "openshift"
  description = "openshift or kubeadm."
}

variable "network" {
  type        = string
  default     = null
  description = "How the node's pods are networked: \"ovn-hybrid\" (OVN-Kubernetes' hybrid overlay, with hybrid-overlay-node and kube-proxy as node services, as WMCO) or \"hostprocess\" (the cluster's CNI and kube-proxy run on the node as HostProcess DaemonSets, upstream's path: Calico through the Tigera operator, sig-windows-tools' kube-proxy-windows; the node gets containerd, the kubelet and the firewall ports, and join waits for those pods) or \"none\" (containerd with hostprocess's CNI dirs and the kubelet, nothing checked or waited for: a site play brings the network, e.g. Flannel or Calico as Windows services; docs/windows-node.md says what it adds). null: ovn-hybrid on OpenShift, hostprocess on kubeadm. The plan checks the cluster runs what the choice needs before any host is changed; upgrade keeps the network join recorded on the Node."
  validation {
    condition     = var.network == null || contains(["ovn-hybrid", "hostprocess", "none"], var.network)
    error_message = "network must be \"ovn-hybrid\", \"hostprocess\" or \"none\"."
  }
}

variable "cni_bin_dir" {
  type        = string
  default     = null
  description = "containerd's CNI bin_dir: where the CNI plugins are. null: C:\\opt\\cni\\bin with network hostprocess (where Calico's and the Flannel DaemonSets write theirs; Calico's windowsNodes.cniBinDir must match), C:\\k\\cni with ovn-hybrid (WMCO's)."
}

variable "cni_conf_dir" {
  type        = string
  default     = null
  description = "containerd's CNI conf_dir: where the CNI network configuration is. null: C:\\etc\\cni\\net.d with network hostprocess (Calico's windowsNodes.cniConfigDir must match), C:\\k\\cni\\config with ovn-hybrid."
}

variable "cni_daemonset" {
  type        = string
  default     = null
  description = "network hostprocess: NAMESPACE/NAME of the cluster's Windows CNI DaemonSet; null: found (calico-system/calico-node-windows, or another HostProcess DaemonSet selecting Windows nodes named after a CNI)."
}

variable "kube_proxy_daemonset" {
  type        = string
  default     = null
  description = "network hostprocess: NAMESPACE/NAME of the cluster's Windows kube-proxy DaemonSet; null: found (kube-system/kube-proxy-windows, or another HostProcess DaemonSet selecting Windows nodes whose name holds kube-proxy)."
}

variable "network_timeout" {
  type        = number
  default     = 600
  description = "network hostprocess: seconds to wait for the CNI and kube-proxy pods to run on the node."
}

variable "network_firewall_ports" {
  type        = map(string)
  default     = null
  description = "Inbound ports the pod network needs, by rule name, as PORT or PORT/PROTOCOL (tcp or udp). null: with network hostprocess UDP 4789 for VXLAN (Calico VXLAN; add { \"wsu-bgp\" = \"179/tcp\" } for Calico BGP), none with ovn-hybrid."
}

variable "kube_proxy_identity" {
  type        = string
  default     = null
  description = "network ovn-hybrid: whose credentials kube-proxy (a node service) uses: \"kubelet\" (the node's, as WMCO; OpenShift grants nodes what kube-proxy needs) or \"own\" (a per-node ServiceAccount bound to system:node-proxier with a Node-bound token, k8s_node_identity: upstream's Node authorizer does not let a node list EndpointSlices; needs deploy/rbac/kubeadm-kube-proxy.yaml bound to wsu). null: kubelet on OpenShift, own on kubeadm."
  validation {
    condition     = var.kube_proxy_identity == null || contains(["kubelet", "own"], var.kube_proxy_identity)
    error_message = "kube_proxy_identity must be \"kubelet\" or \"own\"."
  }
}

variable "csi_proxy" {
  type        = bool
  default     = true
  description = "Run csi-proxy as a node service (Windows CSI node plugins talk to it). false where the cluster runs csi-proxy as a HostProcess DaemonSet instead, or no CSI driver needs it."
}

variable "kubeconfig" {
  type        = string
  default     = null
  description = "Kubeconfig for the cluster side; null: KUBECONFIG or in-cluster."
}

variable "payload_dir" {
  type        = string
  description = "Directory on the machine running wsu with the payload and manifest.json."
}

variable "ignition_source" {
  type        = string
  default     = "machineconfig"
  description = "OpenShift: where the bootstrap kubeconfig and kubelet CA come from: machineconfig (the newest rendered-worker MachineConfig, as current WMCO) or mcs (the Machine Config Server at mcs_url)."
}

variable "api_server" {
  type        = string
  default     = null
  description = "API server URL written into the bootstrap kubeconfig; null: the cluster's own, from kubeconfig."
}

variable "mcs_url" {
  type        = string
  default     = null
  description = "Machine Config Server URL, https://api-int.<cluster>:22623/config/worker (ignition_source = mcs)."
}

variable "mcs_ca" {
  type        = string
  default     = null
  description = "PEM CA the Machine Config Server's certificate must chain to (ignition_source = mcs)."
}

variable "node_name" {
  type        = string
  default     = null
  description = "Node name override (kubelet --hostname-override); null: the host name, lower-cased."
}

variable "node_owner" {
  type        = string
  default     = "wsu"
  description = "Who joins the host: written on its Node as annotation wsu.dev/owner, and required of a Node that already holds the name (a Node that is not a Windows Node, or carries another owner or none, is refused before the host is changed). remove and upgrade take the same value. The controller sets windowsinstance/NAMESPACE/NAME."
}

variable "node_uid" {
  type        = string
  default     = null
  description = "UID the Node must have when it exists (the controller passes the one it recorded at join); null: any."
}

variable "adopt_node" {
  type        = bool
  default     = false
  description = "Take over a Windows Node of this name that carries no wsu.dev/owner annotation (one an earlier wsu joined, or a join cut short before it marked the Node). A Linux Node, or one of another owner, is refused all the same."
}

variable "provider_id" {
  type        = string
  default     = null
  description = "The Node's spec.providerID, given to the kubelet (--provider-id) so it registers with it: an OpenShift Machine API Machine's spec.providerID, which machine-api's nodelink controller matches to link the Node to its Machine (the controller passes the Machine's for an instance made from one). null: none given (a cloud controller sets it)."
}

variable "machine" {
  type        = string
  default     = null
  description = "The OpenShift Machine API Machine of the host, NAMESPACE/NAME: written on its Node as annotation machine.openshift.io/machine, as machine-api's nodelink controller does (the controller passes it for an instance made from a Machine). null: none."
}

variable "platform" {
  type        = string
  default     = null
  description = "Infrastructure platform (AWS, Azure, GCP, VSphere, None, ...), which decides the name the node registers under with an external cloud provider (WMCO's rules: VSphere the FQDN; AWS and GCP the host name the instance metadata service gives, read on the node); null: read from the cluster on OpenShift (Infrastructure status.platformStatus.type), else None. Set on another cluster with an external cloud controller, the kubelet also gets --cloud-provider=external."
}

variable "instance_metadata_url" {
  type        = string
  default     = null
  description = "Base http URL (https is refused: the agent has no TLS) of the instance metadata service the node's name is read from on AWS and GCP (win_instance_metadata); null: the platform's (http://169.254.169.254, http://metadata.google.internal)."
}

variable "node_ip" {
  type        = string
  default     = null
  description = "Node IP (kubelet --node-ip, and the address CSR approval accepts); null: the IPv4 of the interface holding the default route."
}

variable "service_cidr" {
  type        = string
  default     = null
  description = "Cluster service network, for the hybrid overlay's CNI config (excluded from outbound NAT, routed through the overlay); null: read from the cluster (k8s_cluster_network)."
}

variable "cluster_dns" {
  type        = list(string)
  default     = null
  description = "Cluster DNS service addresses (clusterDNS in the kubelet config); null: read from the cluster (k8s_cluster_network)."
}

variable "kubelet_verbosity" {
  type        = number
  default     = 2
  description = "kubelet --v. On OpenShift the worker ignition's --v, when it has one, wins over this value."
}

variable "extra_kubelet_args" {
  type        = list(string)
  default     = []
  description = "Appended to the kubelet command line, e.g. [\"--feature-gates=X=true\"]."
}

variable "hybrid_overlay_vxlan_port" {
  type        = number
  default     = null
  description = "hybrid-overlay-node --hybrid-overlay-vxlan-port, when the cluster uses a non-default VXLAN port; null: the default port."
}

variable "manage_containerd" {
  type        = bool
  default     = true
  description = "Install containerd from the payload and run it as service containerd (current WMCO); false: require an existing containerd service."
}

variable "pause_image" {
  type        = string
  default     = "mcr.microsoft.com/oss/kubernetes/pause:3.9"
  description = "Sandbox (pause) image containerd uses; a disconnected cluster mirrors it (registry_mirrors) or names its own copy here."
}

variable "registry_mirrors" {
  type        = map(list(string))
  default     = null
  description = "containerd registry mirrors: source → mirrors (each ending with the source's path). null: on OpenShift the cluster's ImageDigestMirrorSets and ImageTagMirrorSets, elsewhere none; {} removes the mirrors wsu wrote."
}

variable "registry_auths" {
  type        = map(string)
  default     = null
  sensitive   = true
  description = "Credentials of the mirror registries, by registry host (host[:port]): each the base64 of user:password, as a pull secret's .dockerconfigjson \"auths\" holds them; a mirror on a host listed gets an Authorization header in its hosts.toml, never shown. On OpenShift the cluster's pull secret (openshift-config/pull-secret) gives the mirror hosts' credentials; a host listed here wins over it (set it from a Secret: the controller's spec.varsFrom). null: the pull secret's only."
}

variable "trusted_ca_bundle" {
  type        = string
  default     = null
  description = "PEM CA bundle installed into the node's LocalMachine Root store. null: on OpenShift the cluster proxy's trusted CA bundle, elsewhere none; \"\" removes the certificates wsu added."
}

variable "defender_excluded_processes" {
  type        = list(string)
  default     = ["C:\\k\\containerd\\containerd.exe"]
  description = "Processes Windows Defender does not scan, where Defender is installed (service WinDefend), written as local policy: containerd's, as WMCO excludes it. [] adds none."
}

variable "defender_excluded_paths" {
  type        = list(string)
  default     = ["C:\\ProgramData\\containerd"]
  description = "Directories Windows Defender does not scan, where Defender is installed: containerd's root and state. [] adds none."
}

variable "service_recovery" {
  type        = bool
  default     = true
  description = "Set the services' recovery actions (restart on failure); false leaves them as they are (Wine cannot set them, so its tests turn this off)."
}

variable "http_proxy" {
  type        = string
  default     = null
  description = "Cluster-wide proxy for the node's services, set as the machine environment variable HTTP_PROXY; null: the cluster's (proxy.config.openshift.io/cluster, read at each run by k8s_proxy; \"\" there removes the variable), and where the cluster has no Proxy (vanilla Kubernetes) wsu leaves HTTP_PROXY as it is."
}

variable "https_proxy" {
  type        = string
  default     = null
  description = "Machine environment variable HTTPS_PROXY for the node's services; null: the cluster's, as http_proxy."
}

variable "no_proxy" {
  type        = string
  default     = null
  description = "Machine environment variable NO_PROXY (hosts and networks reached without the proxy; include the service and cluster networks); null: the cluster's, as http_proxy."
}

variable "enable_containers_feature" {
  type        = bool
  default     = true
  description = "Enable the Windows feature Containers before the runtime starts (without it HNS answers \"not supported\" and join stalls at its network waits); false leaves the node's features alone."
}

variable "reboot" {
  type        = string
  default     = "if-needed"
  description = "Whether join may restart the node: \"if-needed\" (the default, as WMCO) restarts it once when enabling Containers needs it, or when the proxy variables changed the machine environment (services read it only at boot); \"never\" does not, and fails the host when Containers waits for a restart."
  validation {
    condition     = contains(["never", "if-needed"], var.reboot)
    error_message = "reboot must be \"never\" or \"if-needed\"."
  }
}

variable "bootstrap_token" {
  type        = string
  default     = null
  sensitive   = true
  description = "A node-only join, as Cluster API's kubeadm bootstrap provider runs one from cloudbase-init (--join-config FILE reads it from a kubeadm JoinConfiguration): a kubeadm bootstrap token, <id>.<secret>. With api_server_endpoint set, join uses no kubeconfig at all: it discovers the cluster with the token and api_server_endpoint (k8s_discovery: cluster-info's signature checked with the token, its CA against ca_cert_hashes), reads the kubelet configuration with the token's rights, and leaves the client CSR to the cluster's csrapproving controller. Steps that need cluster rights a token lacks are not run, and the plan lists them. Needs cluster_flavour kubeadm and node_name."
}

variable "api_server_endpoint" {
  type        = string
  default     = null
  description = "The API server, host:port (kubeadm's discovery.bootstrapToken.apiServerEndpoint): set, join is a node-only join with bootstrap_token (see there)."
}

variable "ca_cert_hashes" {
  type        = list(string)
  default     = []
  description = "Node-only join: the cluster CA's public-key pins, sha256:<hex> over its SubjectPublicKeyInfo (kubeadm's --discovery-token-ca-cert-hash). At least one, unless unsafe_skip_ca_verification."
}

variable "unsafe_skip_ca_verification" {
  type        = bool
  default     = false
  description = "Node-only join: trust the CA cluster-info names without a pin (kubeadm's --discovery-token-unsafe-skip-ca-verification): anyone between the node and the API server could then pose as the cluster."
}

variable "discovery_timeout" {
  type        = number
  default     = 300
  description = "Node-only join: seconds discovery waits for cluster-info to carry the token's signature (kube-controller-manager's bootstrapsigner adds it soon after the token is created; kubeadm's discovery timeout, 5 minutes by default). An unknown or expired token fails once this has passed."
}

variable "server_tls_bootstrap" {
  type        = bool
  default     = null
  description = "kubeadm: the kubelet's serverTLSBootstrap, a serving certificate from the cluster, which someone must approve. null: true when this join approves it (k8s_csr_approve), false in a node-only join (kubeadm's default: the kubelet signs its own); true there only where an approver runs (wsu's controller approves them)."
}

variable "adopt_kubelet" {
  type        = bool
  default     = false
  description = "Take over a kubelet service the image carries (image-builder's Windows images install one) instead of refusing it at preflight; the plan shows what changes in the service."
}

variable "adopt_wmco" {
  type        = bool
  default     = true
  description = "Take over a host WMCO (the Windows Machine Config Operator) configured, without removing and joining it again: its services (descriptions starting \"OpenShift managed\") pass preflight and are reconfigured as wsu's, WMCO's node daemon (windows-instance-config-daemon) and its files are removed, and its Node is kept (same UID, pods left running) when it carries WMCO's windowsmachineconfig.openshift.io/version annotation, no wsu.dev/owner, and the host's address (node_ip, else the address wsu reaches it at) among its addresses; WMCO's leftover Node annotations and labels go. The plan shows each change. Run it only once WMCO no longer runs (scaled to zero or uninstalled), or WMCO puts its own configuration back. false: refuse WMCO's services at preflight."
}

variable "bootstrap_success_file" {
  type        = string
  default     = null
  description = "File written on the node once the Node is Ready, and only then. null: C:\\run\\cluster-api\\bootstrap-success.complete in a node-only join (Cluster API's contract: CAPZ's bootstrap extension waits for it), none otherwise; \"\" none."
}

variable "csr_timeout" {
  type        = number
  default     = 600
  description = "Seconds to wait for the node's client and serving CSRs."
}

variable "ready_timeout" {
  type        = number
  default     = 900
  description = "Seconds to wait for the Node to become Ready after the network is configured."
}

variable "node_labels" {
  type        = list(string)
  default     = null
  description = "Labels the kubelet registers the Node with (--node-labels; the kubelet may not set node-role labels). null: on OpenShift WMCO's node.openshift.io/os_id=Windows, elsewhere none (workloads select kubernetes.io/os=windows, which the kubelet sets itself)."
}

variable "node_taints" {
  type        = list(object({ key = string, value = string, effect = string }))
  default     = null
  description = "Taints the kubelet registers the Node with, as [{ key, value, effect }]. null: on OpenShift WMCO's os=Windows:NoSchedule, elsewhere none (as Cluster API's Windows flavours); [] none."
}

variable "node_labels_after_join" {
  type        = map(string)
  default     = null
  description = "Labels set on the Node through the API once it is Ready (the kubelet may not set node-role labels itself); null: WMCO's, node-role.kubernetes.io/worker and, on OpenShift, windowsmachineconfig.openshift.io/byoh=true."
}

variable "log_file_size" {
  type        = string
  default     = null
  description = "kube-log-runner -log-file-size for the kubelet's and kube-proxy's logs (e.g. \"100M\"); null: the runner's default (no size rotation)."
}

variable "log_file_age" {
  type        = string
  default     = null
  description = "kube-log-runner -log-file-age: how long rotated logs are kept (e.g. \"168h\"); null: the runner's default."
}

variable "log_flush_interval" {
  type        = string
  default     = null
  description = "kube-log-runner -flush-interval (e.g. \"5s\"); null: the runner's default."
}

variable "firewall_ports" {
  type        = map(string)
  default     = { "wsu-kubelet" = "10250", "wsu-windows-exporter" = "9182" }
  description = "Inbound ports opened in the Windows Firewall, by rule name, as PORT (TCP) or PORT/PROTOCOL (tcp or udp): the kubelet's (logs, exec, port-forward, metrics) and windows_exporter's, as WMCO and upstream PrepareNode.ps1 open them. The pod network's ports are network_firewall_ports. The rules carry wsu's group, so remove deletes them and no one else's."
}

variable "version_annotation" {
  type        = string
  default     = null
  description = "Node annotation holding the payload version the node was configured with. null: windowsmachineconfig.openshift.io/version on OpenShift (WMCO's), wsu.dev/version elsewhere; upgrade-node and remove take the same default."
}

variable "min_windows_build" {
  type        = number
  default     = 17763
  description = "Preflight: oldest Windows build accepted (17763: Windows Server 2019)."
}

variable "max_clock_skew" {
  type        = number
  default     = 5
  description = "Preflight: seconds the host's clock may differ from the API server's."
}

variable "disk_reserve" {
  type        = number
  default     = 1073741824
  description = "Preflight: bytes that must stay free on C: beyond the payload."
}

variable "cloud_node_manager_token_ttl" {
  type        = number
  default     = 604800
  description = "Azure: lifetime in seconds of cloud-node-manager's token (k8s_node_identity; renewed by a run once half of it is gone, so re-run join or upgrade more often than this)."
}

variable "cloud_node_manager_namespace" {
  type        = string
  default     = null
  description = "Azure: namespace of each node's cloud-node-manager ServiceAccount; null: metrics_namespace's default (kube-system, WMCO's namespace on OpenShift). Whoever may create its tokens may create any of that namespace's (deploy/rbac/azure-cloud-node-manager.yaml)."
}

variable "metrics_namespace" {
  type        = string
  default     = null
  description = "Namespace of the windows-exporter Service and the nodes' EndpointSlices; null: openshift-windows-machine-config-operator on OpenShift (WMCO's), kube-system elsewhere."
}

variable "metrics_tls_cert" {
  type        = string
  default     = null
  description = "PEM serving certificate windows_exporter presents, with metrics_tls_key: it serves HTTPS only, as WMCO runs it (--web.config.file); null: plain HTTP. Its names must include windows-exporter.<metrics_namespace>.svc, the ServiceMonitor's serverName (deploy/components/prometheus)."
}

variable "metrics_serving_cert_secret" {
  type        = string
  default     = null
  description = "Secret (in metrics_namespace) the service CA writes windows_exporter's serving certificate into, used when metrics_tls_cert is null: the windows-exporter Service asks for it, as WMCO's does. null: windows-exporter-tls on OpenShift, none elsewhere; \"\" none."
}

variable "metrics_tls_key" {
  type        = string
  default     = null
  sensitive   = true
  description = "PEM private key of metrics_tls_cert (from a Secret: spec.varsFrom); readable on the node by SYSTEM and Administrators only."
}

locals {
  # A node-only join holds a bootstrap token and no kubeconfig: it reads
  # the cluster with the bootstrap kubeconfig discovery built. Decided by
  # the endpoint, not the token: a decision on a secret would make every
  # value that depends on it secret too.
  node_only       = var.api_server_endpoint != null
  kubeconfig_data = local.node_only ? task.discovery.bootstrap_kubeconfig : null
  # serverTLSBootstrap only where someone approves serving CSRs.
  server_tls_bootstrap   = var.server_tls_bootstrap != null ? var.server_tls_bootstrap : !local.node_only
  bootstrap_success_file = var.bootstrap_success_file != null ? var.bootstrap_success_file : (local.node_only ? "C:\\run\\cluster-api\\bootstrap-success.complete" : "")
  # The node's network: WMCO's on OpenShift, upstream's HostProcess
  # DaemonSets on kubeadm clusters.
  network             = var.network != null ? var.network : (var.cluster_flavour == "openshift" ? "ovn-hybrid" : "hostprocess")
  cni_bin_dir         = var.cni_bin_dir != null ? var.cni_bin_dir : (local.network == "ovn-hybrid" ? "C:\\k\\cni" : "C:\\opt\\cni\\bin")
  cni_conf_dir        = var.cni_conf_dir != null ? var.cni_conf_dir : (local.network == "ovn-hybrid" ? "C:\\k\\cni\\config" : "C:\\etc\\cni\\net.d")
  kube_proxy_identity = var.kube_proxy_identity != null ? var.kube_proxy_identity : (var.cluster_flavour == "openshift" ? "kubelet" : "own")
  # Every inbound rule, PORT or PORT/PROTOCOL, split.
  firewall_rules = {
    for name, spec in merge(var.firewall_ports, var.network_firewall_ports != null ? var.network_firewall_ports : (local.network == "hostprocess" ? { "wsu-vxlan" = "4789/udp" } : {})) :
    name => { port = split("/", spec)[0], protocol = length(split("/", spec)) > 1 ? lower(split("/", spec)[1]) : "tcp" }
  }
  # wsu's namespace for per-node objects (WMCO's on OpenShift).
  metrics_namespace = coalesce(var.metrics_namespace, var.cluster_flavour == "openshift" ? "openshift-windows-machine-config-operator" : "kube-system")
  # The service CA's certificate for windows_exporter (OpenShift's
  # default), unless a certificate is given or nobody can ask for it.
  metrics_cert_secret_name    = var.metrics_serving_cert_secret != null ? var.metrics_serving_cert_secret : (var.cluster_flavour == "openshift" ? "windows-exporter-tls" : "")
  metrics_serving_cert_secret = local.node_only || var.metrics_tls_cert != null || local.metrics_cert_secret_name == "" ? null : local.metrics_cert_secret_name
  platform                    = var.platform != null ? var.platform : coalesce(try(task["cluster platform"].platform, null), "None")
  # The proxy variables: given, else the cluster's (k8s_proxy; null where
  # the cluster has no Proxy).
  proxy_env = {
    HTTP_PROXY  = var.http_proxy != null ? var.http_proxy : try(task["cluster proxy"].http_proxy, null)
    HTTPS_PROXY = var.https_proxy != null ? var.https_proxy : try(task["cluster proxy"].https_proxy, null)
    NO_PROXY    = var.no_proxy != null ? var.no_proxy : try(task["cluster proxy"].no_proxy, null)
  }
  # vSphere's cloud controller finds the node by its FQDN, AWS's and GCP's
  # by the instance metadata name (play "node name"); elsewhere the
  # host name (configure-kubelet's default) or node_name.
  node_name = var.node_name != null ? var.node_name : (local.platform == "VSphere" ? lower(host.facts.fqdn) : try(task["instance metadata name"].node_name, null))
  # The name the kubelet registers (configure-kubelet's default: the host
  # name, lower-cased).
  registered_name = coalesce(local.node_name, lower(host.facts.hostname))
  # The address the node is known by: the node IP the admin gave, else the
  # address wsu reaches the host at (what CSR approval accepts, and what
  # WMCO tied its BYOH entry's Node to).
  node_address = coalesce(var.node_ip, try(host.vars.ansible_host, null), host.name)
  # adopt_wmco: WMCO's Node of this host is taken (k8s_node_owner).
  wmco_address = var.adopt_wmco && !local.node_only ? local.node_address : null
  # WMCO's Node annotations and labels wsu does not use: every join removes
  # them (a Node WMCO never configured has none, and nothing changes).
  wmco_leftover_annotations = { for a in ["desired-version", "pub-key-hash", "username", "reboot-required"] : "windowsmachineconfig.openshift.io/${a}" => null }
  wmco_leftover_labels      = { "windowsmachineconfig.openshift.io/upgrading" = null }
  # OpenShift's ignition names the cloud provider; elsewhere a platform the
  # site names means an external cloud controller.
  cloud_provider = include.ignition.cloud_provider != null ? include.ignition.cloud_provider : (var.platform != null && var.platform != "None" ? "external" : null)
  # kube-log-runner's flags for the kubelet and kube-proxy: rotation is the
  # runner's, not the wrapped binary's (WMCO's SERVICES_LOG_FILE_* settings).
  log_runner_flags = concat(
    var.log_file_size != null ? ["-log-file-size=${var.log_file_size}"] : [],
    var.log_file_age != null ? ["-log-file-age=${var.log_file_age}"] : [],
    var.log_flush_interval != null ? ["-flush-interval=${var.log_flush_interval}"] : [],
  )
  # WMCO labels Windows workers once they are Ready; the byoh label is an
  # OpenShift (WMCO) convention, meaningless elsewhere.
  node_labels_after_join = var.node_labels_after_join != null ? var.node_labels_after_join : merge(
    { "node-role.kubernetes.io/worker" = "" },
    var.cluster_flavour == "openshift" ? { "windowsmachineconfig.openshift.io/byoh" = "true" } : {},
  )
  # WMCO's registration label, taint and annotation name are OpenShift's;
  # a vanilla cluster gets none of them unless asked.
  openshift          = var.cluster_flavour == "openshift"
  node_labels        = var.node_labels != null ? var.node_labels : (local.openshift ? ["node.openshift.io/os_id=Windows"] : [])
  node_taints        = var.node_taints != null ? var.node_taints : (local.openshift ? [{ key = "os", value = "Windows", effect = "NoSchedule" }] : [])
  version_annotation = var.version_annotation != null ? var.version_annotation : (local.openshift ? "windowsmachineconfig.openshift.io/version" : "wsu.dev/version")
  # Off OpenShift, WMCO's annotation (which older wsu wrote everywhere) is
  # removed once wsu's own holds the version.
  version_annotations = merge(
    !local.openshift && local.version_annotation != "windowsmachineconfig.openshift.io/version" ? { "windowsmachineconfig.openshift.io/version" = null } : {},
    { (local.version_annotation) = include.payload.version },
  )
}

# A node-only join (bootstrap_token): the cluster found with the token
# alone, as kubeadm join's token discovery does, before anything else. A
# wrong pin, an altered cluster-info or an unknown token stops it here,
# with the host untouched.
play "discovery" {
  hosts = "windows"

  task "node-only inputs" {
    when = local.node_only
    assert {
      that         = [var.cluster_flavour == "kubeadm", var.bootstrap_token != null, var.node_name != null, local.network != "ovn-hybrid", var.kubeconfig == null]
      fail_message = "A node-only join (api_server_endpoint set) needs cluster_flavour = \"kubeadm\", bootstrap_token and node_name (nodeRegistration.name: the Windows computer name may be cut to 15 characters), a network other than ovn-hybrid, and no kubeconfig."
    }
  }

  task "discovery" {
    when = local.node_only
    k8s_discovery {
      api_server_endpoint         = var.api_server_endpoint
      token                       = var.bootstrap_token
      ca_cert_hashes              = var.ca_cert_hashes
      unsafe_skip_ca_verification = var.unsafe_skip_ca_verification
      timeout                     = var.discovery_timeout
    }
  }

  # What a bootstrap token may not do, said in every plan of a node-only
  # join rather than left out in silence.
  task "steps not run" {
    when = local.node_only
    print {
      msg = "Node-only join: not run, for want of cluster rights a bootstrap token lacks: CSR approval (kube-controller-manager's csrapproving approves the client CSR), the node's wsu.dev/owner mark, labels after join (${join(", ", keys(local.node_labels_after_join))}), the version annotation, the network DaemonSet check and wait, windows-exporter's metrics endpoint, cloud-node-manager's identity. Labels the kubelet may set itself go in node_labels (--node-labels)."
    }
  }
}

# Before anything changes: one error per problem that would fail the join
# later (node name, Windows build, clock, disk, foreign services, API
# server reachability).
include "preflight" {
  source = "./preflight.hcl"
  vars = {
    kubeconfig        = var.kubeconfig
    kubeconfig_data   = local.kubeconfig_data
    adopt_services    = var.adopt_kubelet ? ["kubelet"] : []
    adopt_wmco        = var.adopt_wmco
    payload_dir       = var.payload_dir
    node_name         = var.node_name
    api_server        = local.node_only ? task.discovery.api_server : var.api_server
    manage_containerd = var.manage_containerd
    min_windows_build = var.min_windows_build
    max_clock_skew    = var.max_clock_skew
    disk_reserve      = var.disk_reserve
  }
}

# The node name: a Node that already holds it must be this host's, a
# Windows Node annotated wsu.dev/owner=node_owner (kubeadm join refuses a
# name a Ready Node holds). A Linux or control-plane Node, a Windows Node
# another tool joined, one another host or instance joined: refused here,
# before the host is changed. The name is the one the kubelet will
# register: vSphere's cloud controller finds the node by its FQDN, AWS's
# and GCP's by the name their instance metadata service gives, which only
# the node can reach (the node reads it; the plan shows the name); on
# OpenShift the platform is the cluster's. node_name overrides.
play "node name" {
  hosts = "windows"

  task "cluster platform" {
    when = var.platform == null && var.cluster_flavour == "openshift"
    k8s_cluster_check {
      kubeconfig = var.kubeconfig
    }
  }

  task "instance metadata name" {
    when = var.node_name == null && contains(["AWS", "GCP"], local.platform)
    win_instance_metadata {
      platform = local.platform
      endpoint = var.instance_metadata_url
    }
  }

  # Node-only: whether the host holds the kubelet's credentials already
  # (a re-run), for kubeadm's Ready-Node rule.
  task "kubelet credentials" {
    when = local.node_only
    win_stat {
      path = "C:\\k\\kubeconfig"
    }
  }

  task "node name" {
    k8s_node_owner {
      kubeconfig      = var.kubeconfig
      kubeconfig_data = local.kubeconfig_data
      name            = local.registered_name
      owner           = local.node_only ? null : var.node_owner
      joined          = local.node_only && try(task["kubelet credentials"].exists, false)
      uid             = var.node_uid
      adopt           = var.adopt_node
      wmco_address    = local.wmco_address
    }
  }
}

# A host WMCO configured (adopt_wmco; preflight found WMCO's services):
# WMCO's node daemon, WICD, puts WMCO's service definitions back from the
# cluster whenever they differ, so it goes first, with its binary and its
# credential (a kubeconfig of WMCO's ServiceAccount); its logs stay. The
# services it ran are reconfigured as wsu's by the plays below, each
# change in the plan.
play "wmco leftovers" {
  hosts = "windows"

  task "wmco node daemon" {
    when = include.preflight.wmco
    win_service {
      name  = "windows-instance-config-daemon"
      state = "absent"
    }
  }

  task "wmco node daemon files" {
    for_each = include.preflight.wmco ? toset(["C:\\k\\windows-instance-config-daemon.exe", "C:\\k\\wicd-kubeconfig"]) : toset([])
    win_file {
      path  = each.key
      state = "absent"
    }
  }
}

# The cluster runs what the node's network relies on: the Windows CNI
# and kube-proxy DaemonSets (hostprocess), or OVN-Kubernetes with the
# hybrid overlay (ovn-hybrid on a vanilla cluster; OpenShift's operator
# config is read by check-runtime). Checked before any play changes the
# host.
play "network check" {
  hosts = "windows"

  task "windows network" {
    when = !local.node_only && (local.network == "hostprocess" || local.network == "ovn-hybrid" && var.cluster_flavour != "openshift")
    k8s_windows_network {
      kubeconfig           = var.kubeconfig
      network              = local.network
      cni_daemonset        = var.cni_daemonset
      kube_proxy_daemonset = var.kube_proxy_daemonset
    }
  }
}

# Stale CNI state (host-local IPAM leases of pods that are gone) makes new
# pods fail to get addresses; WMCO removes C:\var\lib\cni before each
# configuration. wsu does so on the first configuration only (no kubelet
# service of its own yet, so no pod ran under it): on a re-run of a running
# node the directory holds its live pods' leases.
play "stale cni state" {
  hosts = "windows"

  task "stale cni state" {
    when = include.preflight.first_configuration
    win_directory {
      path  = "C:\\var\\lib\\cni"
      state = "absent"
    }
  }
}

# The cluster-wide proxy, as machine environment variables, and the
# Containers feature, before the runtime starts. Windows services take
# their environment from the service control manager, which reads it at
# boot, and a newly enabled Containers works only after a restart: with
# reboot = "if-needed" the node restarts once for either (as WMCO does);
# with "never" a pending Containers fails the host, saying so. A proxy
# variable left null is the cluster's Proxy (read each run, so a changed
# Proxy reaches the node at its next run; "" there removes the variable);
# where the cluster has none, the node's value is left alone.
play "proxy-settings" {
  hosts = "windows"

  task "cluster proxy" {
    when = !local.node_only && (var.http_proxy == null || var.https_proxy == null || var.no_proxy == null)
    k8s_proxy {
      kubeconfig = var.kubeconfig
    }
  }

  task "proxy settings" {
    for_each = { for k, v in local.proxy_env : k => v if v != null }
    win_env {
      name  = each.key
      value = each.value != "" ? each.value : null
      state = each.value != "" ? "present" : "absent"
    }
    notify = ["restart for the proxy"]
  }

  task "containers feature" {
    when = var.enable_containers_feature
    win_optional_feature {
      name = "Containers"
    }
  }

  task "containers restart refused" {
    when = var.reboot == "never" && try(task["containers feature"].reboot_required, false)
    assert {
      that         = [false]
      fail_message = "The Windows feature Containers is enabled but takes effect only after a restart, and reboot = \"never\": restart the node yourself and run join again, or run it with reboot = \"if-needed\"."
    }
  }

  task "restart for containers" {
    when = var.reboot == "if-needed" && try(task["containers feature"].reboot_required, false)
    win_reboot {
      msg = "wsu join: restart to enable the Windows feature Containers"
    }
  }

  # One restart is enough: skipped when the Containers one already ran.
  handler "restart for the proxy" {
    when = var.reboot == "if-needed" && !try(task["containers feature"].reboot_required, false)
    win_reboot {
      msg = "wsu join: restart so that services see the proxy settings"
    }
  }
}

# The cluster reaches the kubelet (10250) and the metrics exporter (9182)
# on the node; Windows Firewall blocks inbound connections by default.
play "firewall" {
  hosts = "windows"

  task "inbound ports" {
    for_each = local.firewall_rules
    win_firewall_rule {
      name        = each.key
      description = "Opened by wsu for the cluster"
      localport   = each.value.port
      protocol    = each.value.protocol
    }
  }
}

# kubeadm: the kubelet runs with the cluster's own configuration
# (kube-system/kubelet-config, as kubeadm join writes it, adapted to
# Windows); OpenShift's comes from WMCO's template. A kubeadm cluster
# without kubeadm's ConfigMaps fails here, and in the plan. kubeadm's Roles
# let bootstrap tokens and nodes read both ConfigMaps, so a node-only join
# reads them too (and takes the service network and DNS from them).
play "kubelet configuration" {
  hosts = "windows"

  task "cluster kubelet config" {
    when = var.cluster_flavour == "kubeadm"
    k8s_kubelet_config {
      kubeconfig           = var.kubeconfig
      kubeconfig_data      = local.kubeconfig_data
      node_name            = local.registered_name
      cluster_dns          = var.cluster_dns
      server_tls_bootstrap = local.server_tls_bootstrap
    }
  }
}

include "runtime" {
  source = "./check-runtime.hcl"
  vars = {
    cluster_flavour   = var.cluster_flavour
    cni_bin_dir       = local.cni_bin_dir
    cni_conf_dir      = local.cni_conf_dir
    kubeconfig        = var.kubeconfig
    manage_containerd = var.manage_containerd
    payload_dir       = var.payload_dir
    service_recovery  = var.service_recovery
    service_cidr      = var.service_cidr != null || !local.node_only ? var.service_cidr : try(task["cluster kubelet config"].service_cidrs[0], null)
    cluster_dns       = var.cluster_dns != null || !local.node_only ? var.cluster_dns : task["cluster kubelet config"].cluster_dns
    pause_image       = var.pause_image
    registry_mirrors  = var.registry_mirrors
    registry_auths    = var.registry_auths
    trusted_ca_bundle = var.trusted_ca_bundle

    defender_excluded_processes = var.defender_excluded_processes
    defender_excluded_paths     = var.defender_excluded_paths
  }
}

include "payload" {
  source = "./copy-payload.hcl"
  vars = {
    payload_dir = var.payload_dir
  }
}

include "ignition" {
  source = "./extract-ignition.hcl"
  vars = {
    cluster_flavour = var.cluster_flavour
    kubeconfig      = var.kubeconfig
    ignition_source = var.ignition_source
    api_server      = var.api_server
    mcs_url         = var.mcs_url
    mcs_ca          = var.mcs_ca

    bootstrap_kubeconfig = local.kubeconfig_data
    cluster_ca           = local.node_only ? task.discovery.ca : null
    cluster_api_server   = local.node_only ? task.discovery.api_server : null
    bootstrap_requester  = local.node_only ? task.discovery.requester : null
  }
}

include "kubelet" {
  source = "./configure-kubelet.hcl"
  vars = {
    node_name          = local.node_name
    node_ip            = var.node_ip
    cluster_dns        = include.runtime.cluster_dns
    kubelet_config     = try(task["cluster kubelet config"].config, null)
    node_labels        = local.node_labels
    node_taints        = local.node_taints
    kubelet_verbosity  = coalesce(include.ignition.kubelet_verbosity, var.kubelet_verbosity)
    extra_kubelet_args = concat(var.extra_kubelet_args, var.provider_id != null ? ["--provider-id=${var.provider_id}"] : [])
    log_runner_flags   = local.log_runner_flags
    cloud_provider     = local.cloud_provider
    cloud_config       = include.ignition.cloud_config
    service_recovery   = var.service_recovery
  }
}

# The kubelet asks for a client certificate, registers the Node, then asks
# for a serving certificate. Only CSRs that pass every rule are approved.
play "certificates" {
  hosts = "windows"

  # Node-only: kube-controller-manager's csrapproving controller approves
  # the client CSR of a kubeadm token; nothing here may approve.
  task "approve csrs" {
    when = !local.node_only
    k8s_csr_approve {
      kubeconfig = var.kubeconfig
      node_name  = include.kubelet.node_name
      # What the admin gave, never what the host reports of itself: the
      # node IP (node_ip), else the address wsu reached the host at (a DNS
      # name is resolved on the machine running wsu), and the node name.
      addresses     = [local.node_address]
      hostnames     = [include.kubelet.node_name]
      service_cidrs = include.runtime.service_cidr != null ? [include.runtime.service_cidr] : []
      timeout       = var.csr_timeout
      # kubeadm: the client CSR comes from the bootstrap token's identity.
      client_requesters = var.cluster_flavour == "kubeadm" && include.ignition.bootstrap_requester != null ? [include.ignition.bootstrap_requester] : null
    }
  }
}

# The bootstrap kubeconfig is a credential (a bootstrap token, or
# OpenShift's node-bootstrapper token) the kubelet needs only until it has
# its client certificate: once the kubelet has written its own kubeconfig,
# the bootstrap one goes. A re-run finds both as they are and changes
# nothing (extract-ignition writes none while C:\k\kubeconfig exists).
play "bootstrap credentials" {
  hosts = "windows"

  task "kubelet kubeconfig" {
    win_wait {
      file    = "C:\\k\\kubeconfig"
      timeout = var.csr_timeout
    }
  }

  task "bootstrap kubeconfig removed" {
    win_file {
      path  = "C:\\k\\bootstrap-kubeconfig"
      state = "absent"
    }
  }

  # The Node the kubelet registered carries wsu's mark from here on: cordon,
  # drain, label, upgrade and remove act only on a Node so marked. A Node
  # that was not there at the name check is this kubelet's.
  task "node owner" {
    when = !local.node_only
    k8s_node_owner {
      kubeconfig   = var.kubeconfig
      name         = include.kubelet.node_name
      owner        = var.node_owner
      uid          = var.node_uid
      adopt        = var.adopt_node || !try(task["node name"].exists, true)
      wmco_address = local.wmco_address
      wait         = var.ready_timeout
    }
  }
}

# OVN-Kubernetes' hybrid overlay and kube-proxy as node services: only
# with network ovn-hybrid. With hostprocess the cluster's DaemonSets bring
# the CNI and kube-proxy, and the "network pods" wait below stands for them.
include "overlay" {
  source = "./hybrid-overlay.hcl"
  when   = local.network == "ovn-hybrid"
  vars = {
    kubeconfig                = var.kubeconfig
    node_name                 = include.kubelet.node_name
    api_server                = include.ignition.api_server
    service_cidr              = include.runtime.service_cidr
    hybrid_overlay_vxlan_port = var.hybrid_overlay_vxlan_port != null ? var.hybrid_overlay_vxlan_port : include.runtime.hybrid_overlay_vxlan_port
    service_recovery          = var.service_recovery
  }
}

include "kube_proxy" {
  source = "./kube-proxy.hcl"
  when   = local.network == "ovn-hybrid"
  vars = {
    node_name        = include.kubelet.node_name
    node_subnet      = include.overlay.node_subnet
    log_runner_flags = local.log_runner_flags
    service_recovery = var.service_recovery
    identity         = local.kube_proxy_identity
    kubeconfig       = var.kubeconfig
    api_server       = include.ignition.api_server
  }
}

include "csi" {
  source = "./csi-proxy.hcl"
  when   = var.csi_proxy
  vars = {
    service_recovery = var.service_recovery
  }
}

# Azure: cloud-node-manager with its own per-node identity removes the
# Node's uninitialized taint (the kubelet registered it with
# --cloud-provider=external).
include "cloud_node_manager" {
  source = "./cloud-node-manager.hcl"
  vars = {
    kubeconfig       = var.kubeconfig
    enabled          = local.platform == "Azure" && !local.node_only
    node_name        = include.kubelet.node_name
    namespace        = coalesce(var.cloud_node_manager_namespace, local.metrics_namespace)
    api_server       = include.ignition.api_server
    token_ttl        = var.cloud_node_manager_token_ttl
    service_recovery = var.service_recovery
  }
}

play "ready" {
  hosts = "windows"

  # On Azure the Node has arrived once cloud-node-manager removed its
  # uninitialized taint (elsewhere the cluster's cloud controller does, in
  # its own time).
  task "node ready" {
    k8s_node_wait {
      kubeconfig      = var.kubeconfig
      kubeconfig_data = local.kubeconfig_data
      name            = include.kubelet.node_name
      without_taint   = local.platform == "Azure" ? "node.cloudprovider.kubernetes.io/uninitialized" : null
      timeout         = var.ready_timeout
    }
  }

  # hostprocess: networked means the cluster's CNI and kube-proxy pods
  # run on the node (the DaemonSets the runtime check found).
  task "network pods" {
    when = local.network == "hostprocess" && !local.node_only
    k8s_node_pods_wait {
      kubeconfig = var.kubeconfig
      node_name  = include.kubelet.node_name
      daemonsets = [task["windows network"].cni_daemonset, task["windows network"].kube_proxy_daemonset]
      timeout    = var.network_timeout
    }
  }

  task "labels and version annotation" {
    when = !local.node_only
    k8s_node {
      kubeconfig = var.kubeconfig
      name       = include.kubelet.node_name
      owner      = var.node_owner
      # WMCO's Node, which the plan finds unmarked (the name check marks it
      # in apply): checked by the name check, against WMCO's annotation
      # and the host's address, not by the mark.
      only_if_owned = !try(task["node name"].wmco, false)
      labels        = merge(local.wmco_leftover_labels, local.node_labels_after_join)
      annotations   = merge(local.wmco_leftover_annotations, local.version_annotations, { "wsu.dev/network" = local.network }, var.machine != null ? { "machine.openshift.io/machine" = var.machine } : {})
    }
  }
}

# windows_exporter as a service, and its endpoint in the windows-exporter
# Service, once the Node exists (its EndpointSlice is owned by the Node).
include "monitoring" {
  source = "./windows-exporter.hcl"
  vars = {
    kubeconfig          = var.kubeconfig
    node_name           = include.kubelet.node_name
    node_ip             = include.kubelet.node_ip
    publish             = !local.node_only
    namespace           = local.metrics_namespace
    service_recovery    = var.service_recovery
    take_over           = include.preflight.wmco
    tls_cert            = var.metrics_tls_cert
    tls_key             = var.metrics_tls_key
    serving_cert_secret = local.metrics_serving_cert_secret
  }
}

# Cluster API's contract: the file its bootstrap extension waits for, once
# the Node is Ready and only then (a failed join never reaches this play).
play "bootstrap success" {
  hosts = "windows"

  task "bootstrap success file" {
    when = local.bootstrap_success_file != ""
    win_file {
      path    = local.bootstrap_success_file
      content = "success\n"
    }
  }
}
