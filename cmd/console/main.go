// Command console serves the GPU quota governance console: it reads its
// flags, signs users in (package auth), has package app build and wire the
// console's parts, serves them, and shuts down gracefully, closing the task
// history's store last.
//
// It imports the console's own packages, and none of the test helpers or
// measuring tools (internal/kueuetest, internal/webtest, internal/testenv,
// internal/loopback, sandbox, deploy).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/openquota/console/internal/app"
	"github.com/openquota/console/internal/auth"
	"github.com/openquota/console/internal/domain"
	"github.com/openquota/console/internal/handlers"
	"github.com/openquota/console/internal/kueue"
	"github.com/openquota/console/internal/version"
)

type options struct {
	kubeconfig    string
	prometheusURL string
	listen        string
	// metricsListen serves /metrics with the figures of the cluster ("" off).
	metricsListen string
	logFormat     string
	logLevel      string
	settings      domain.Settings

	authMode          auth.Mode
	proxyUserHeader   string
	proxyGroupsHeader string
	proxyCIDRs        []netip.Prefix
	proxyHosts        []string
	proxySecretFile   string
	trustedProxies    []netip.Prefix
	secureCookies     bool
	sessionKeyFile    string
	tokenAudiences    []string

	taskHistory taskHistoryOptions

	// memoryLimitMiB is the Go runtime's soft memory limit; 0 keeps Go's
	// default (or GOMEMLIMIT).
	memoryLimitMiB int

	version bool
	// profileListen serves Go's profiles, on loopback only ("" off).
	profileListen string
}

func parseFlags(args []string) (options, error) {
	// Our own FlagSet: Kueue's packages register a global --kubeconfig flag.
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default: $KUBECONFIG, else in-cluster config)")
	fs.StringVar(&o.prometheusURL, "prometheus-url", "", "base URL of the Prometheus that scrapes Kueue and dcgm-exporter")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve HTTP on")
	fs.StringVar(&o.metricsListen, "metrics-listen", "", "address to serve /metrics on with the console's figures of the cluster too (per team, priority class and instance type: what its alerts and dashboard read); off when empty. They name every team: serve them where only Prometheus reaches, never on --listen, whose /metrics anyone may read")
	fs.StringVar(&o.settings.NamespacePrefix, "namespace-prefix", domain.DefaultSettings.NamespacePrefix, "prefix of team namespaces (team t gets <prefix>t)")
	fs.StringVar(&o.settings.Cohort, "cohort", domain.DefaultSettings.Cohort, "the cohort every team's ClusterQueue joins")
	fs.StringVar(&o.settings.StateNamespace, "state-namespace", domain.DefaultSettings.StateNamespace, "the console's own namespace, where it keeps revision histories (installs create it; a local run creates it if needed)")
	fs.StringVar(&o.settings.ClusterName, "cluster-name", "", "the cluster's name in reports (the usage report's HyperPod layout); default: the apiserver's address")
	fs.StringVar(&o.settings.PodSecurity, "team-pod-security", domain.DefaultPodSecurity, "the Pod Security level team namespaces enforce: "+strings.Join(domain.PodSecurityLevels, " or "))
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	mode := fs.String("auth", string(auth.ModeNone), "how users sign in: none (loopback --listen only), proxy (an authenticating proxy's headers) or token (a Kubernetes bearer token, checked with a TokenReview)")
	fs.StringVar(&o.proxyUserHeader, "auth-proxy-user-header", auth.DefaultUserHeader, "--auth proxy: header with the user name")
	fs.StringVar(&o.proxyGroupsHeader, "auth-proxy-groups-header", auth.DefaultGroupsHeader, "--auth proxy: header with the user's groups, comma-separated")
	cidrs := fs.String("auth-proxy-cidrs", auth.DefaultProxyCIDRs, "--auth proxy: comma-separated source addresses (CIDRs) of the proxy whose headers are trusted; empty trusts none (then only the secret)")
	hosts := fs.String("auth-proxy-hosts", "", "--auth proxy: comma-separated host names the proxy forwards requests for (the names people reach the console by, as the proxy passes them in Host); a request trusted by its address (--auth-proxy-cidrs) is answered only when addressed to one of them or to a loopback name")
	fs.StringVar(&o.proxySecretFile, "auth-proxy-secret-file", "", "--auth proxy: file with a shared secret; requests carrying it in the "+auth.SecretHeader+" header are trusted from any address")
	fs.StringVar(&o.sessionKeyFile, "session-key-file", "", "file with a secret of at least 32 bytes that signs sessions, CSRF tokens and flash messages; replicas that share it accept each other's sessions (default: a random key per process, so a restart signs everyone out)")
	trustedProxies := fs.String("trusted-proxy-cidrs", "", "comma-separated addresses (CIDRs) of proxies in front of the console (an Ingress controller's pods) whose X-Forwarded-For names the client, for the sign-in limits per client address; empty: the TCP peer is the client")
	audiences := fs.String("auth-token-audience", "", "--auth token: comma-separated audiences a token must be issued for (default: the apiserver's own)")
	fs.BoolVar(&o.secureCookies, "secure-cookies", false, "mark cookies Secure on plain HTTP too (the console is behind a TLS-terminating proxy); on TLS requests they always are")
	o.taskHistory.register(fs)
	fs.IntVar(&o.memoryLimitMiB, "memory-limit-mib", defaultMemoryLimitMiB, "soft memory limit of the Go runtime, in MiB: the heap is collected sooner rather than let grow to twice what the console holds (the chart requests 256 MiB for the whole process); 0 keeps Go's default or GOMEMLIMIT")
	fs.BoolVar(&o.version, "version", false, "print the version and revision, then exit")
	fs.StringVar(&o.profileListen, "profile-listen", "", "loopback address to serve Go's profiles on (/debug/pprof/), for measuring; off when empty")
	if err := fs.Parse(args); err != nil || o.version {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.memoryLimitMiB < 0 {
		return o, fmt.Errorf("--memory-limit-mib must be 0 or more, not %d", o.memoryLimitMiB)
	}
	fs.Visit(func(f *flag.Flag) { o.taskHistory.pathSet = o.taskHistory.pathSet || f.Name == "history-path" })
	if err := o.taskHistory.check(); err != nil {
		return o, err
	}
	if !slices.Contains(domain.PodSecurityLevels, o.settings.PodSecurity) {
		return o, fmt.Errorf("--team-pod-security must be %s, not %q", strings.Join(domain.PodSecurityLevels, " or "), o.settings.PodSecurity)
	}
	if o.profileListen != "" && !auth.IsLoopback(o.profileListen) {
		return o, fmt.Errorf("--profile-listen must be a loopback address, not %q: profiles show the console's memory", o.profileListen)
	}
	if o.metricsListen != "" && o.metricsListen == o.listen {
		return o, fmt.Errorf("--metrics-listen must differ from --listen (%q): its /metrics names every team", o.listen)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("--log-format must be text or json, not %q", o.logFormat)
	}
	var err error
	if o.authMode, err = auth.ParseMode(*mode); err != nil {
		return o, err
	}
	if err := auth.CheckListen(o.authMode, o.listen); err != nil {
		return o, err
	}
	if o.proxyHosts, err = auth.ParseHosts(*hosts); err != nil {
		return o, err
	}
	if o.proxyCIDRs, err = auth.ParseCIDRs(*cidrs); err != nil {
		return o, err
	}
	if o.trustedProxies, err = auth.ParseTrustedProxies(*trustedProxies); err != nil {
		return o, err
	}
	o.tokenAudiences = auth.SplitGroups(*audiences)
	if len(o.tokenAudiences) > 0 && o.authMode != auth.ModeToken {
		return o, errors.New("--auth-token-audience is only used with --auth token")
	}
	if o.authMode == auth.ModeProxy {
		if o.proxyUserHeader == "" || o.proxyGroupsHeader == "" {
			return o, errors.New("--auth-proxy-user-header and --auth-proxy-groups-header must not be empty")
		}
		if len(o.proxyCIDRs) == 0 && o.proxySecretFile == "" {
			return o, errors.New("--auth proxy needs --auth-proxy-cidrs or --auth-proxy-secret-file: otherwise no request is trusted")
		}
	} else if o.proxySecretFile != "" {
		return o, errors.New("--auth-proxy-secret-file is only used with --auth proxy")
	}
	return o, nil
}

// authenticator builds the auth mode's Authenticator; kube makes the token
// mode's TokenReviews and keeps its sign-outs (until ctx ends). Its keys are
// bound to the cluster; token mode, whose sessions are at stake, needs the
// cluster's UID, the other modes fall back to the apiserver's address.
func authenticator(ctx context.Context, o options, kube kubernetes.Interface, server string, log *slog.Logger) (*auth.Authenticator, error) {
	keys := auth.RandomKeys()
	if o.sessionKeyFile != "" {
		var err error
		if keys, err = auth.ReadKeyFile(o.sessionKeyFile); err != nil {
			return nil, err
		}
	}
	clusterID, err := clusterUID(ctx, kube)
	if err != nil && o.authMode == auth.ModeToken {
		return nil, err
	}
	if err != nil {
		log.Warn("CSRF tokens and flash messages are bound to the apiserver's address instead", "err", err)
		clusterID = server
	}
	a := &auth.Authenticator{Mode: o.authMode, SecureCookies: o.secureCookies, Keys: keys.For(clusterID, o.authMode), TrustedProxies: o.trustedProxies}
	switch o.authMode {
	case auth.ModeProxy:
		a.Proxy = auth.Proxy{UserHeader: o.proxyUserHeader, GroupsHeader: o.proxyGroupsHeader, Trusted: o.proxyCIDRs, Hosts: o.proxyHosts}
		if o.proxySecretFile != "" {
			secret, err := auth.ReadSecret(o.proxySecretFile)
			if err != nil {
				return nil, err
			}
			a.Proxy.Secret = secret
		}
	case auth.ModeToken:
		a.Tokens = auth.KubeTokenReviewer{Client: kube, Audiences: o.tokenAudiences}
		// Sign-outs are kept in the cluster, so they end the session on
		// every replica.
		signedOut := kueue.NewSignOuts(kube, o.settings.State(), auth.DefaultMaxSignOuts, auth.SignOutExpiry(auth.SessionTTL))
		signedOut.Start(ctx)
		a.Sessions = auth.NewSessions(a.Keys, auth.SessionTTL, auth.Replicated(signedOut, auth.DefaultMaxSignOuts, auth.SessionTTL))
	}
	return a, nil
}

// clusterUID is the UID of the cluster's kube-system namespace, which
// sessions, CSRF tokens and flash messages are bound to (auth.Keys.For):
// consoles of two clusters that share a session key accept none of each
// other's. An apiserver that is not up yet is asked again for a while.
func clusterUID(ctx context.Context, kube kubernetes.Interface) (string, error) {
	var uid string
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 6}, func(ctx context.Context) (bool, error) {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		switch {
		case err == nil:
			uid = string(ns.UID)
			return uid != "", nil
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err):
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the UID of namespace kube-system, which binds sessions to this cluster (the console's account needs get on namespace kube-system): %w", err)
	}
	return uid, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.version {
		fmt.Println(version.Get())
		return
	}
	log := newLogger(o)
	// client-go's own messages (leader election, throttling) in the same
	// format as the console's.
	klog.SetSlogLogger(log)
	if err := run(o, log); err != nil {
		log.Error("console stopped", "err", err)
		os.Exit(1)
	}
}

// serveProfiles serves Go's profiles on a loopback address of their own,
// never next to the pages.
func serveProfiles(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("serving profiles", "url", "http://"+addr+"/debug/pprof/")
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		log.Warn("profiles not served", "err", err)
	}
}

func newLogger(o options) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(o.logLevel))
	hopts := &slog.HandlerOptions{Level: level}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, hopts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, hopts))
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// defaultMemoryLimitMiB keeps the whole process within the chart's memory
// request (256 MiB): the limit covers what the Go runtime holds, and the
// binary's pages and memory outside the runtime (about 48 MiB) come on top.
// Go lets the heap grow to twice the live heap before collecting; with a
// soft limit it collects sooner, at a little CPU. Above the limit Go caps
// the collector's share of the CPU, so a larger cluster is slower to
// collect, never stuck.
const defaultMemoryLimitMiB = 208

func run(o options, log *slog.Logger) error {
	// GOMEMLIMIT, when set, is the operator's choice; the flag, when given,
	// is too.
	if o.memoryLimitMiB > 0 && (os.Getenv("GOMEMLIMIT") == "" || o.memoryLimitMiB != defaultMemoryLimitMiB) {
		debug.SetMemoryLimit(int64(o.memoryLimitMiB) << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	cfg.UserAgent = "quota-console"
	// A team save makes about 16 requests (apply, dry run, revisions,
	// event): client-go's default of 5/s would add a second to every save.
	cfg.QPS, cfg.Burst = 50, 100
	clients, err := kueue.NewClients(cfg)
	if err != nil {
		return err
	}
	if o.settings.ClusterName == "" {
		o.settings.ClusterName = cfg.Host
	}
	authn, err := authenticator(ctx, o, clients.Kube, cfg.Host, log)
	if err != nil {
		return err
	}
	history, err := o.taskHistory.config()
	if err != nil {
		return err
	}
	// The console's parts run until ctx ends; live update streams end with
	// it too, or Shutdown would wait for them until its timeout.
	console, err := app.New(ctx, app.Config{Settings: o.settings, Clients: clients, Server: cfg.Host, PrometheusURL: o.prometheusURL,
		Auth: authn, TaskHistory: history, Log: log})
	if err != nil {
		return err
	}
	defer func() {
		stop() // the recorder's last batch, then the store
		if err := console.Close(); err != nil {
			log.Warn("closing the task history store", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := handlers.NewHTTPServer(console.Handler(), handlers.DefaultTimeouts)
	log.Info("console listening", "url", "http://"+ln.Addr().String(), "kubernetes", cfg.Host, "prometheus", o.prometheusURL, "auth", o.authMode)
	if o.authMode == auth.ModeToken && !o.secureCookies && !auth.IsLoopback(o.listen) {
		log.Warn("--auth token on plain HTTP: serve the console behind TLS and set --secure-cookies, or session cookies travel in clear text")
	}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	servers := []*http.Server{srv}
	if o.metricsListen != "" {
		mln, err := net.Listen("tcp", o.metricsListen)
		if err != nil {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		msrv := handlers.NewHTTPServer(console.MetricsHandler(), handlers.DefaultTimeouts)
		log.Info("serving metrics with the cluster's figures", "url", "http://"+mln.Addr().String()+"/metrics")
		go func() { errc <- msrv.Serve(mln) }()
		servers = append(servers, msrv)
	}
	if o.profileListen != "" {
		go serveProfiles(o.profileListen, log)
	}

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Shutdown waits for in-flight requests; live streams end with ctx.
	for _, s := range servers {
		if err := s.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}
