// Command probe is the process the pod runner's tests run in their test
// image: each argument group is one step, run in order; the first failing
// step exits 1 after printing why.
//
//	cp SRC DST               copy a file
//	expect-file PATH TEXT    fail unless the file holds exactly TEXT
//	expect-env NAME TEXT     fail unless $NAME is TEXT
//	expect-id UID GID        fail unless running as UID:GID
//	whoami-api USER          ask the API server (in-cluster token) who we are; fail unless USER
//	message TEXT             write TEXT to /dev/termination-log
//	print TEXT               print TEXT
//	exit N                   exit with status N
//	sleep                    wait for a signal
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

func main() {
	args := os.Args[1:]
	for len(args) > 0 {
		n, err := step(args)
		if err != nil {
			fmt.Fprintf(os.Stderr, "probe: %s: %v\n", args[0], err)
			os.Exit(1)
		}
		args = args[n:]
	}
}

func step(a []string) (int, error) {
	need := func(n int) error {
		if len(a) < n+1 {
			return fmt.Errorf("needs %d arguments", n)
		}
		return nil
	}
	switch a[0] {
	case "cp":
		if err := need(2); err != nil {
			return 0, err
		}
		b, err := os.ReadFile(a[1])
		if err != nil {
			return 0, err
		}
		return 3, os.WriteFile(a[2], b, 0o644)
	case "expect-file":
		if err := need(2); err != nil {
			return 0, err
		}
		b, err := os.ReadFile(a[1])
		if err != nil {
			return 0, err
		}
		if string(b) != a[2] {
			return 0, fmt.Errorf("%s holds %q, want %q", a[1], b, a[2])
		}
		return 3, nil
	case "expect-env":
		if err := need(2); err != nil {
			return 0, err
		}
		if v := os.Getenv(a[1]); v != a[2] {
			return 0, fmt.Errorf("$%s is %q, want %q", a[1], v, a[2])
		}
		return 3, nil
	case "expect-id":
		if err := need(2); err != nil {
			return 0, err
		}
		if got := fmt.Sprintf("%d %d", os.Getuid(), os.Getgid()); got != a[1]+" "+a[2] {
			return 0, fmt.Errorf("running as %s, want %s %s", got, a[1], a[2])
		}
		return 3, nil
	case "whoami-api":
		if err := need(1); err != nil {
			return 0, err
		}
		return 2, whoami(a[1])
	case "message":
		if err := need(1); err != nil {
			return 0, err
		}
		return 2, os.WriteFile("/dev/termination-log", []byte(a[1]), 0o644)
	case "print":
		if err := need(1); err != nil {
			return 0, err
		}
		fmt.Println(a[1])
		return 2, nil
	case "exit":
		if err := need(1); err != nil {
			return 0, err
		}
		n, err := strconv.Atoi(a[1])
		if err != nil {
			return 0, err
		}
		os.Exit(n)
	case "sleep":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		<-c
		os.Exit(0)
	}
	return 0, fmt.Errorf("unknown step")
}

// whoami posts a SelfSubjectReview with the pod's ServiceAccount token, as
// an in-cluster client would.
func whoami(want string) error {
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	token, err := os.ReadFile(sa + "token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(sa + "ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("ca.crt holds no certificate")
	}
	url := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")) +
		"/apis/authentication.k8s.io/v1/selfsubjectreviews"
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: %w", resp.Status, err)
	}
	if got := out.Status.UserInfo.Username; got != want {
		return fmt.Errorf("the API server says we are %q, want %q (%s)", got, want, resp.Status)
	}
	fmt.Println("api user:", want)
	return nil
}
