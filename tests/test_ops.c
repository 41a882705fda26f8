/*
 * Operating a fabric: the manager's metrics endpoint (libmicrohttpd) read
 * by `promtool check metrics` and scraped by a real Prometheus server
 * (Debian's prometheus), `incoll stat --format`, the metrics under load
 * (two jobs, a killed AN) against `incoll stat`, the systemd units
 * checked by `systemd-analyze verify` and `security`, and `make install`
 * of the units, configuration examples and Slurm plugin. Each skips only
 * when the package it needs is missing.
 */
#include "integ.h"

#include "common/mgr_proto.h"
#include "fabric/mgr_tool.h"
#include "mgr/mgr_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * GET path from ip:port (HTTP/1.0) with an Accept header (or none); the
 * status, and the body and Content-Type into *body_p (caller frees) and
 * type. -1 when it cannot connect or the answer does not come in 5 s.
 */
static int http_get(uint32_t ip, int port, const char *path, const char *accept,
                    char **body_p, char *type, size_t typelen)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    char req[512];
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1), *hdr_end, *ct;
    double end = now_s() + 5;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;

    sa.sin_addr.s_addr = htonl(ip);
    sa.sin_port = htons((uint16_t)port);
    if (buf == NULL || fd < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        free(buf);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", path,
             accept ? "Accept: " : "", accept ? accept : "",
             accept ? "\r\n" : "");
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
        goto out;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ssize_t n;
        if (now_s() > end || poll(&pfd, 1, 200) < 0)
            goto out;
        if (!(pfd.revents & (POLLIN | POLLHUP)))
            continue;
        if (len == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (nb == NULL)
                goto out;
            buf = nb;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0)
            goto out;
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    hdr_end = strstr(buf, "\r\n\r\n");
    if (hdr_end == NULL || sscanf(buf, "HTTP/%*s %d", &status) != 1)
        goto out;
    *hdr_end = '\0';
    type[0] = '\0';
    ct = strcasestr(buf, "\r\nContent-Type: ");
    if (ct)
        snprintf(type, typelen, "%.*s", (int)strcspn(ct + 16, "\r\n"), ct + 16);
    *body_p = strdup(hdr_end + 4);
out:
    free(buf);
    close(fd);
    return status;
}

/* The value of the sample line starting with "name{labels} " (or "name ")
 * in a metrics text, or -1. */
static double metric(const char *text, const char *sample)
{
    size_t n = strlen(sample);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, sample, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

static int have(const char *path)
{
    return access(path, X_OK) == 0;
}

typedef struct {
    char dir[PATH_MAX - 64];
    char mgr[64];
    char secret[PATH_MAX];
    int mport;
} fab_t;

/* The fabric fab_up() brought up last, brought down by the test whatever
 * its body returned. */
static char last_fab[PATH_MAX];

static void last_fab_down(void)
{
    if (last_fab[0])
        test_fabric_down(last_fab);
    last_fab[0] = '\0';
}

/* A managed fabric of 4 hosts (ANs root, l0, l1) with its metrics on
 * 127.0.0.1:mport. */
static int fab_up(fab_t *f, const char *name)
{
    char path[PATH_MAX + 32], addr[64], *env;
    snprintf(f->dir, sizeof(f->dir), "%s/%s", test_tmpdir(), name);
    f->mport = free_tcp_port();
    CHECK(f->mport > 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", f->mport);
    snprintf(last_fab, sizeof(last_fab), "%s", f->dir);
    setenv("INCOLL_MGR_METRICS", addr, 1);
    CHECK(test_fabric_up(f->dir, 4, 2) == 0);
    unsetenv("INCOLL_MGR_METRICS");
    snprintf(path, sizeof(path), "%s/fabric.env", f->dir);
    env = slurp(path);
    CHECK(strstr(env, "INCOLL_MGR=") &&
          sscanf(strstr(env, "INCOLL_MGR=") + 11, "%63s", f->mgr) == 1);
    free(env);
    snprintf(f->secret, sizeof(f->secret), "%s/secret", f->dir);
    return 0;
}

static char *get_metrics(fab_t *f, int om)
{
    char type[128], *body = NULL;
    int st = http_get(0x7f000001u, f->mport, "/metrics",
                      om ? "application/openmetrics-text;version=1.0.0,"
                           "text/plain;version=0.0.4;q=0.5"
                         : NULL,
                      &body, type, sizeof(type));
    if (st != 200) {
        fprintf(stderr, "    GET /metrics: status %d\n", st);
        free(body);
        return NULL;
    }
    if (strstr(type, om ? "application/openmetrics-text; version=1.0.0"
                        : "text/plain; version=0.0.4") == NULL) {
        fprintf(stderr, "    GET /metrics: Content-Type %s\n", type);
        free(body);
        return NULL;
    }
    return body;
}

static char *stat_text(fab_t *f, uint32_t flags)
{
    char *text = NULL, err[256];
    if (mgr_tool_stat_flags(f->mgr, f->secret, flags, 3000, &text, err,
                            sizeof(err)) != INCOLL_OK) {
        fprintf(stderr, "    stat: %s\n", err);
        return calloc(1, 1);
    }
    return text;
}

/* promtool check metrics on text; 0 when it has nothing to say. */
static int promtool(const char *text, const char *tag)
{
    char in[PATH_MAX], out[PATH_MAX];
    FILE *f;
    int rc;
    char *said;
    snprintf(in, sizeof(in), "%s/%s.prom", test_tmpdir(), tag);
    snprintf(out, sizeof(out), "%s/%s.promtool", test_tmpdir(), tag);
    f = fopen(in, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    fclose(f);
    rc = sh(out, "promtool check metrics < '%s'", in);
    said = slurp(out);
    if (rc != 0 || said[0] != '\0')
        fprintf(stderr, "    promtool check metrics (%s): exit %d\n%s\n", tag,
                rc, said);
    rc = rc != 0 || said[0] != '\0';
    free(said);
    return rc;
}

/* The endpoint in both formats, checked by promtool, its address bound as
 * configured, no secret in it; then a Prometheus server scrapes it (it
 * asks for OpenMetrics) and has the fabric's numbers. */
static int prometheus_body(void)
{
    fab_t f;
    proc_t job;
    char *om, *pr, *text, *secret, path[2 * PATH_MAX], type[128], *body;
    char conf[1024], data[PATH_MAX + 32], listen[64], *argv[8];
    int pport, st;
    double end;

    CHECK(fab_up(&f, "prom") == 0);
    CHECK(
        proc_start(&job, 60,
                   "env INCOLL_JOB=promjob '%s/incoll' run -n 4 --fabric '%s' "
                   "-- '%s/comm_grid' --cols 2 --seconds 6 --count 300",
                   test_bindir(), f.dir, progdir()) == 0);
    end = now_s() + 20;
    do {
        sleep_s(0.2);
        text = stat_text(&f, 0);
        st = mgr_tool_stat_value(text, "job name=promjob ", "groups") >= 3;
        free(text);
    } while (!st && now_s() < end);
    CHECK_MSG(st, "the job never had its groups");
    om = get_metrics(&f, 1);
    pr = get_metrics(&f, 0);
    CHECK(om && pr);
    CHECK(strcmp(om + strlen(om) - 6, "# EOF\n") == 0);
    CHECK(promtool(pr, "endpoint") == 0);
    text = stat_text(&f, MGR_STAT_F_PROMETHEUS);
    CHECK(promtool(text, "stat") == 0);
    free(text);
    CHECK(metric(om, "incoll_job_groups{job=\"promjob\"}") >= 3);
    /* The alert rules of docs/deployment.md. */
    snprintf(path, sizeof(path), "%s/rules.out", test_tmpdir());
    CHECK_MSG(sh(path,
                 "promtool check rules '%s/contrib/prometheus/"
                 "incoll-alerts.yml'",
                 test_srcdir()) == 0,
              "promtool check rules failed (%s)", path);
    CHECK(metric(pr, "incoll_manager_ans{state=\"up\"}") == 3);
    /* Nothing secret: not the fabric secret, not a group key. */
    secret = slurp(f.secret);
    CHECK(secret[0] && strstr(om, secret) == NULL &&
          strstr(pr, secret) == NULL);
    free(secret);
    CHECK(strstr(om, "key") == NULL);
    /* Where the operator said, and nowhere else. */
    CHECK(http_get(0x7f000002u, f.mport, "/metrics", NULL, &body, type,
                   sizeof(type)) == -1);
    CHECK(http_get(0x7f000001u, f.mport, "/nothing", NULL, &body, type,
                   sizeof(type)) == 404);
    free(body);

    /* A real Prometheus server scraping it every second. */
    pport = free_tcp_port();
    snprintf(conf, sizeof(conf),
             "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
             "scrape_configs:\n  - job_name: incoll\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n",
             f.mport);
    snprintf(path, sizeof(path), "%s/prometheus.yml", test_tmpdir());
    {
        FILE *c = fopen(path, "w");
        CHECK(c != NULL);
        fputs(conf, c);
        fclose(c);
    }
    snprintf(data, sizeof(data), "--storage.tsdb.path=%s/tsdb", test_tmpdir());
    snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d",
             pport);
    {
        char cf[2 * PATH_MAX + 128], log[PATH_MAX + 32];
        snprintf(cf, sizeof(cf), "--config.file=%s", path);
        snprintf(log, sizeof(log), "%s/prometheus.log", test_tmpdir());
        argv[0] = "/usr/bin/prometheus";
        argv[1] = cf;
        argv[2] = data;
        argv[3] = listen;
        argv[4] = NULL;
        CHECK(spawn(log, argv, NULL) > 0);
    }
    end = now_s() + 30;
    st = 0;
    while (!st && now_s() < end) {
        char *res = NULL;
        sleep_s(0.5);
        if (http_get(0x7f000001u, pport,
                     "/api/v1/query?query=incoll_manager_ans%7Bstate%3D%22up%"
                     "22%7D",
                     NULL, &res, type, sizeof(type)) == 200 &&
            strstr(res, "\"status\":\"success\"") && strstr(res, ",\"3\"]"))
            st = 1;
        free(res);
    }
    CHECK_MSG(st, "Prometheus never had incoll_manager_ans{state=\"up\"} 3");
    body = NULL;
    CHECK(http_get(0x7f000001u, pport, "/api/v1/targets", NULL, &body, type,
                   sizeof(type)) == 200);
    CHECK_MSG(strstr(body, "\"health\":\"up\"") &&
                  strstr(body, "\"lastError\":\"\""),
              "%s", body);
    free(body);
    body = NULL;
    CHECK(http_get(0x7f000001u, pport,
                   "/api/v1/query?query=incoll_an_reductions_total", NULL,
                   &body, type, sizeof(type)) == 200);
    CHECK_MSG(strstr(body, "\"an\":\"root\""), "%s", body);
    free(body);
    /* Where the job's collectives ran, with the job's name beside the
     * scrape job's (Prometheus keeps both: exported_job). */
    end = now_s() + 10;
    st = 0;
    body = NULL;
    while (!st && now_s() < end) {
        free(body);
        body = NULL;
        st = http_get(0x7f000001u, pport,
                      "/api/v1/query?query=incoll_job_operations_total", NULL,
                      &body, type, sizeof(type)) == 200 &&
             strstr(body, "\"exported_job\":\"promjob\"") &&
             strstr(body, "\"where\":\"network\"");
        if (!st)
            sleep_s(0.5);
    }
    CHECK_MSG(st, "Prometheus never had incoll_job_operations_total: %s",
              body ? body : "");
    free(body);
    CHECK(proc_wait(&job) == 0);
    free(job.out);
    free(om);
    free(pr);
    return TEST_PASSED;
}

TEST_LIMIT(integ_ops_prometheus, TEST_INTEG, 120)
{
    int r;
    if (!mgr_http_available())
        return test_skip("libmicrohttpd-dev is not installed "
                         "(scripts/install-deps.sh)");
    if (!have("/usr/bin/promtool") || !have("/usr/bin/prometheus"))
        return test_skip("prometheus is not installed "
                         "(scripts/install-deps.sh)");
    r = prometheus_body();
    stop_all();
    last_fab_down();
    return r;
}

/* The metrics once sample's value is want, read every 0.2 s for up to
 * secs; NULL, with the last text on stderr, when it never is. */
static char *metrics_when(fab_t *f, const char *sample, double want,
                          double secs)
{
    double end = now_s() + secs;
    char *om = NULL;
    while (now_s() < end) {
        sleep_s(0.2);
        free(om);
        om = get_metrics(f, 1);
        if (om && metric(om, sample) == want)
            return om;
    }
    fprintf(stderr, "    %s never came to %g:\n%s\n", sample, want,
            om ? om : "");
    free(om);
    return NULL;
}

/*
 * Where a job's collectives ran: a job runs allreduces and broadcasts in
 * the network and allreduces with a host-based algorithm it asked for;
 * while it lives the manager's metrics and `incoll stat` say exactly how
 * many ran where and why (promtool has nothing to say about them); when
 * it ends its series go.
 */
static int usage_body(void)
{
    fab_t f;
    proc_t job;
    char hold[PATH_MAX], *om = NULL, *pr, *text;
    double end;
    int ok = 0;
    static const char *const other[] = {"no_manager", "refused", "group_failed",
                                        "unsupported"};

    CHECK(fab_up(&f, "usage") == 0);
    snprintf(hold, sizeof(hold), "%s/usage.hold", test_tmpdir());
    unlink(hold);
    CHECK(proc_start(&job, 60,
                     "env INCOLL_JOB=usejob '%s/incoll' run -n 4 --fabric '%s' "
                     "-- '%s/usage_check' --net 5 --sw 3 --bcast 2 --hold '%s'",
                     test_bindir(), f.dir, progdir(), hold) == 0);
    om = metrics_when(&f,
                      "incoll_job_operations_total{job=\"usejob\","
                      "where=\"software\"}",
                      3, 30);
    CHECK_MSG(om != NULL, "the job's software operations never showed");
    CHECK_MSG(metric(om, "incoll_job_operations_total{job=\"usejob\","
                         "where=\"network\"}") == 7,
              "%s", om);
    CHECK(metric(om, "incoll_job_fallbacks_total{job=\"usejob\","
                     "reason=\"requested\"}") == 3);
    for (int i = 0; i < 4; i++) {
        char name[160];
        snprintf(name, sizeof(name),
                 "incoll_job_fallbacks_total{job=\"usejob\",reason=\"%s\"}",
                 other[i]);
        CHECK_MSG(metric(om, name) == 0, "%s", name);
    }
    free(om);
    /* Every process's own counters of the result path, summed: each of
     * the 4 ranks counts its 10 calls; each takes every result of the 8
     * operations in the network (the 7 and one of the library's own)
     * exactly once, from its leaf's multicast copy or by a unicast repair
     * when that was late, but a broadcast's root, whose result comes by
     * unicast (2 of the 32); loopback carries multicast: no fallback. */
    om = metrics_when(&f, "incoll_job_rank_operations_total{job=\"usejob\"}",
                      40, 10);
    CHECK_MSG(om != NULL, "the ranks' own counts never came to 40");
    {
        double mres = metric(om, "incoll_job_mcast_results_total{job="
                                 "\"usejob\"}"),
               mrep = metric(om, "incoll_job_mcast_repaired_total{job="
                                 "\"usejob\"}");
        CHECK_MSG(mres > 0 && mres + mrep == 4 * 8 - 2, "%s", om);
        CHECK(metric(om, "incoll_job_mcast_fallbacks_total{job=\"usejob\"}") ==
              0);
        CHECK(metric(om, "incoll_job_mcast_duplicates_total{job="
                         "\"usejob\"}") >= 0);
        CHECK(metric(om, "incoll_job_rank_datagrams_received_total{job="
                         "\"usejob\"}") >= mres + mrep);
        CHECK(metric(om, "incoll_job_rank_datagrams_sent_total{job="
                         "\"usejob\"}") >= 4 * 8);
        CHECK(metric(om, "incoll_job_rank_wakeups_total{job=\"usejob\"}") > 0);
    }
    CHECK(metric(om, "incoll_manager_usage_refused_total") == 0);
    CHECK(metric(om, "incoll_manager_usage_reports_total") >= 1);
    pr = get_metrics(&f, 0);
    CHECK(pr && promtool(pr, "usage") == 0);
    free(pr);
    text = stat_text(&f, 0);
    CHECK_MSG(strstr(text, "usage job=usejob network=7 software=3 "
                           "no_manager=0 refused=0 group_failed=0 "
                           "unsupported=0 requested=3\n"),
              "%s", text);
    CHECK_MSG(strstr(text, "host_counters job=usejob ops=40 rx_datagrams="),
              "%s", text);
    free(text);
    free(om);
    /* The job ends: its series go with it. */
    CHECK(close(creat(hold, 0600)) == 0);
    CHECK_MSG(proc_wait(&job) == 0, "%s", job.out);
    CHECK_MSG(strstr(job.out, "offloaded 1 why"), "%s", job.out);
    free(job.out);
    end = now_s() + 10;
    ok = 0;
    while (!ok && now_s() < end) {
        sleep_s(0.2);
        om = get_metrics(&f, 1);
        ok = om && strstr(om, "job=\"usejob\"") == NULL;
        free(om);
    }
    CHECK_MSG(ok, "the ended job's series stayed");
    /* A job that expects offload and gets none: its communicators ask for
     * more slots than any AN has, the manager refuses their groups, and
     * every collective runs in software for that reason. */
    unlink(hold);
    CHECK(proc_start(&job, 60,
                     "env INCOLL_JOB=nogroup INCOLL_GROUP_SLOTS=65535 "
                     "'%s/incoll' run -n 4 --fabric '%s' -- "
                     "'%s/usage_check' --net 2 --sw 1 --bcast 1 --hold '%s'",
                     test_bindir(), f.dir, progdir(), hold) == 0);
    om = metrics_when(&f,
                      "incoll_job_operations_total{job=\"nogroup\","
                      "where=\"software\"}",
                      4, 30);
    CHECK_MSG(om != NULL, "the refused job's operations never showed");
    CHECK(metric(om, "incoll_job_operations_total{job=\"nogroup\","
                     "where=\"network\"}") == 0);
    CHECK(metric(om, "incoll_job_fallbacks_total{job=\"nogroup\","
                     "reason=\"refused\"}") == 3);
    CHECK(metric(om, "incoll_job_fallbacks_total{job=\"nogroup\","
                     "reason=\"requested\"}") == 1);
    CHECK_MSG(metric(om, "incoll_job_groups_refused_total{job=\"nogroup\","
                         "reason=\"fabric\"}") +
                      metric(om, "incoll_job_groups_refused_total{job="
                                 "\"nogroup\",reason=\"quota\"}") >=
                  1,
              "%s", om);
    free(om);
    CHECK(close(creat(hold, 0600)) == 0);
    CHECK_MSG(proc_wait(&job) == 0, "%s", job.out);
    CHECK_MSG(strstr(job.out, "offloaded 0 why no fabric group"), "%s",
              job.out);
    free(job.out);
    /* Two ranks per host: the allreduces go through the hosts' leaders
     * and count once each, where the leaders ran them. */
    unlink(hold);
    CHECK(proc_start(&job, 60,
                     "env INCOLL_JOB=hierjob '%s/incoll' run -n 4 --ppn 2 "
                     "--fabric '%s' -- '%s/usage_check' --net 3 --sw 2 "
                     "--bcast 1 --hold '%s'",
                     test_bindir(), f.dir, progdir(), hold) == 0);
    om = metrics_when(&f,
                      "incoll_job_operations_total{job=\"hierjob\","
                      "where=\"software\"}",
                      2, 30);
    CHECK_MSG(om != NULL, "the hierarchical job's operations never showed");
    CHECK_MSG(metric(om, "incoll_job_operations_total{job=\"hierjob\","
                         "where=\"network\"}") == 4,
              "%s", om);
    CHECK(metric(om, "incoll_job_fallbacks_total{job=\"hierjob\","
                     "reason=\"requested\"}") == 2);
    free(om);
    CHECK(close(creat(hold, 0600)) == 0);
    CHECK_MSG(proc_wait(&job) == 0, "%s", job.out);
    free(job.out);
    return TEST_PASSED;
}

TEST_LIMIT(integ_ops_usage, TEST_INTEG, 90)
{
    int r;
    if (!mgr_http_available())
        return test_skip("libmicrohttpd-dev is not installed "
                         "(scripts/install-deps.sh)");
    if (!have("/usr/bin/promtool"))
        return test_skip("prometheus is not installed "
                         "(scripts/install-deps.sh)");
    r = usage_body();
    stop_all();
    last_fab_down();
    return r;
}

/* The sum over jobs of the samples of name whose labels contain label. */
static double metric_sum(const char *text, const char *name, const char *label)
{
    double sum = 0;
    size_t n = strlen(name);
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n'), *sp;
        if (strncmp(p, name, n) == 0 && p[n] == '{' &&
            (sp = strstr(p, "} ")) != NULL && (eol == NULL || sp < eol)) {
            const char *hit = strstr(p, label);
            if (hit && hit < sp)
                sum += strtod(sp + 2, NULL);
        }
        p = eol ? eol + 1 : NULL;
    }
    return sum;
}

/*
 * Calls the PMPI layer (and the Open MPI component) give to MPI's own
 * count too: an MPI job under `incoll mpirun --layer pmpi|component` runs
 * allreduces with MPI_SUM (in the network) and with a user-defined op (MPI's
 * own, reason unsupported), and the manager's per-job counts say exactly that
 * while the job lives.
 */
static int usage_mpi_body(const char *prog, const char *layer)
{
    fab_t f;
    proc_t job;
    char hold[PATH_MAX], *om = NULL;
    double end;
    int ok = 0;

    CHECK(fab_up(&f, layer) == 0);
    snprintf(hold, sizeof(hold), "%s/usage-mpi.hold", test_tmpdir());
    unlink(hold);
    CHECK(
        proc_start(&job, 90,
                   "env INCOLL_TUNE_FILE=none '%s/incoll' mpirun --layer pmpi "
                   "-n 4 --fabric '%s' --timeout 80 -- '%s' --net 5 --user 4 "
                   "--hold '%s'",
                   test_bindir(), f.dir, prog, hold) == 0);
    end = now_s() + 60;
    while (!ok && now_s() < end) {
        sleep_s(0.2);
        free(om);
        om = get_metrics(&f, 1);
        ok = om && metric_sum(om, "incoll_job_operations_total",
                              "where=\"network\"") >= 6;
    }
    CHECK_MSG(ok, "the MPI job's operations never showed:\n%s", om ? om : "");
    CHECK_MSG(
        metric_sum(om, "incoll_job_operations_total", "where=\"network\"") == 6,
        "%s", om);
    CHECK_MSG(metric_sum(om, "incoll_job_operations_total",
                         "where=\"software\"") == 4,
              "%s", om);
    CHECK_MSG(metric_sum(om, "incoll_job_fallbacks_total",
                         "reason=\"unsupported\"") == 4,
              "%s", om);
    free(om);
    CHECK(close(creat(hold, 0600)) == 0);
    CHECK_MSG(proc_wait(&job) == 0, "%s", job.out);
    CHECK_MSG(strstr(job.out, "usage_mpi: ok"), "%s", job.out);
    free(job.out);
    return TEST_PASSED;
}

TEST_LIMIT(integ_ops_usage_mpi, TEST_INTEG, 150)
{
    char prog[PATH_MAX], lib[PATH_MAX + 32];
    const char *dir = getenv("INCOLL_TEST_PROGDIR");
    int r;
    if (!mgr_http_available())
        return test_skip("libmicrohttpd-dev is not installed "
                         "(scripts/install-deps.sh)");
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        return test_skip("mpirun is not installed (scripts/install-deps.sh)");
    snprintf(prog, sizeof(prog), "%s/mpi/usage_mpi", dir ? dir : "build/tests");
    CHECK_MSG(access(prog, X_OK) == 0, "%s is not built", prog);
    r = usage_mpi_body(prog, "pmpi");
    stop_all();
    last_fab_down();
    snprintf(lib, sizeof(lib), "%s/../lib/openmpi/mca_coll_incoll.so",
             test_bindir());
    if (r != TEST_PASSED || access(lib, R_OK) != 0)
        return r; /* the component is built where Open MPI's headers are */
    r = usage_mpi_body(prog, "component");
    stop_all();
    last_fab_down();
    return r;
}

/* The lines of the manager's stat about an AN and the manager that the
 * metrics must agree with, when nothing moves. */
static int consistent(fab_t *f, const char *stat, const char *om)
{
    static const char *const ans[] = {"root", "l0", "l1"};
    char pre[64], name[128];
    struct {
        const char *key, *fam;
    } mgr_map[] = {
        {"groups", "incoll_manager_groups"},
        {"jobs", "incoll_manager_jobs"},
        {"groups_made", "incoll_manager_groups_made_total"},
        {"groups_failed",
         "incoll_manager_groups_ended_total{cause=\"failed\"}"},
        {"groups_released",
         "incoll_manager_groups_ended_total{cause=\"released\"}"},
        {"an_failures", "incoll_manager_an_failures_total"},
        {"ans_up", "incoll_manager_ans{state=\"up\"}"},
        {"conns_accepted", "incoll_manager_connections_accepted_total"},
    };
    (void)f;
    for (size_t i = 0; i < sizeof(mgr_map) / sizeof(mgr_map[0]); i++) {
        long long s = mgr_tool_stat_value(stat, "manager ", mgr_map[i].key);
        double v = metric(om, mgr_map[i].fam);
        /* Connections: the stat's own connection came after. */
        if (strcmp(mgr_map[i].key, "conns_accepted") == 0)
            CHECK_MSG(v >= (double)s - 1 && v <= (double)s, "%s %lld %g",
                      mgr_map[i].key, s, v);
        else
            CHECK_MSG(s >= 0 && v == (double)s, "manager %s=%lld, %s %g",
                      mgr_map[i].key, s, mgr_map[i].fam, v);
    }
    for (int i = 0; i < 3; i++) {
        long long s;
        snprintf(pre, sizeof(pre), "an name=%s ", ans[i]);
        s = mgr_tool_stat_value(stat, pre, "groups");
        snprintf(name, sizeof(name), "incoll_an_groups{an=\"%s\"}", ans[i]);
        CHECK_MSG(metric(om, name) == (double)s, "%s %lld", name, s);
        s = mgr_tool_stat_value(stat, pre, "slots");
        snprintf(name, sizeof(name), "incoll_an_slots{an=\"%s\"}", ans[i]);
        CHECK_MSG(metric(om, name) == (double)s, "%s %lld", name, s);
        snprintf(pre, sizeof(pre), "counters an=%s ", ans[i]);
        s = mgr_tool_stat_value(stat, pre, "reductions");
        snprintf(name, sizeof(name), "incoll_an_reductions_total{an=\"%s\"}",
                 ans[i]);
        CHECK_MSG(s < 0 ? metric(om, name) < 0 : metric(om, name) == (double)s,
                  "%s %lld", name, s);
    }
    return 0;
}

/* Two jobs at once and an AN killed under them: the metrics say what
 * `incoll stat` says (counters never behind it while things move, equal
 * once they stop), `incoll stat --format openmetrics` is what the
 * endpoint serves, and the failure shows. */
static int load_body(void)
{
    fab_t f;
    proc_t a, b;
    char path[PATH_MAX + 32], *text, *om, *om2, *cli = NULL;
    double end;
    int ok = 0;
    pid_t root;

    CHECK(fab_up(&f, "load") == 0);
    CHECK(
        proc_start(&a, 90,
                   "env INCOLL_JOB=loadA '%s/incoll' run -n 4 --fabric '%s' -- "
                   "'%s/comm_grid' --cols 2 --seconds 5 --count 300",
                   test_bindir(), f.dir, progdir()) == 0);
    CHECK(
        proc_start(&b, 90,
                   "env INCOLL_JOB=loadB '%s/incoll' run -n 4 --fabric '%s' -- "
                   "'%s/comm_grid' --cols 2 --seconds 5 --count 300",
                   test_bindir(), f.dir, progdir()) == 0);
    end = now_s() + 20;
    while (!ok && now_s() < end) {
        sleep_s(0.2);
        text = stat_text(&f, 0);
        ok = mgr_tool_stat_value(text, "job name=loadA ", "groups") >= 3 &&
             mgr_tool_stat_value(text, "job name=loadB ", "groups") >= 3;
        free(text);
    }
    CHECK_MSG(ok, "the jobs never had their groups");
    /* While they run, the counters are never behind the stat before. */
    for (int round = 0; round < 3; round++) {
        text = stat_text(&f, 0);
        om = get_metrics(&f, 1);
        CHECK(om != NULL);
        for (int i = 0; i < 3; i++) {
            static const char *const ans[] = {"root", "l0", "l1"};
            char pre[64], name[128];
            snprintf(pre, sizeof(pre), "counters an=%s ", ans[i]);
            snprintf(name, sizeof(name),
                     "incoll_an_reductions_total{an=\"%s\"}", ans[i]);
            CHECK_MSG(metric(om, name) >=
                          (double)mgr_tool_stat_value(text, pre, "reductions"),
                      "%s", name);
        }
        CHECK(metric(om, "incoll_manager_jobs") == 2);
        /* Where the jobs' collectives ran: never behind the stat. */
        for (int i = 0; i < 2; i++) {
            static const char *const jobs[] = {"loadA", "loadB"};
            char pre[64], name[128];
            snprintf(pre, sizeof(pre), "usage job=%s ", jobs[i]);
            snprintf(name, sizeof(name),
                     "incoll_job_operations_total{job=\"%s\",where="
                     "\"network\"}",
                     jobs[i]);
            CHECK_MSG(metric(om, name) >=
                          (double)mgr_tool_stat_value(text, pre, "network"),
                      "%s", name);
        }
        free(text);
        free(om);
        sleep_s(0.3);
    }
    /* The root AN dies under both jobs. */
    snprintf(path, sizeof(path), "%s/root.pid", f.dir);
    text = slurp(path);
    root = atoi(text);
    free(text);
    CHECK(root > 0 && kill(root, SIGKILL) == 0);
    end = now_s() + 10;
    ok = 0;
    while (!ok && now_s() < end) {
        sleep_s(0.2);
        om = get_metrics(&f, 0);
        ok = om && metric(om, "incoll_an_up{an=\"root\",level=\"2\"}") == 0 &&
             metric(om, "incoll_manager_ans{state=\"down\"}") == 1 &&
             metric(om, "incoll_an_failures_total{an=\"root\"}") == 1 &&
             metric(om, "incoll_job_groups_failed_total{job=\"loadA\"}") >= 1 &&
             metric(om, "incoll_job_groups_failed_total{job=\"loadB\"}") >= 1;
        free(om);
    }
    CHECK_MSG(ok, "the metrics never showed the root AN down and the jobs' "
                  "groups failed");
    /* The jobs' own fate after the failure is the recovery's
     * (test_recovery.c); here they only make the load. */
    {
        int ra = proc_wait(&a), rb = proc_wait(&b);
        if (ra != 0 || rb != 0)
            fprintf(stderr,
                    "    note: a job ended with %d/%d after the AN was "
                    "killed (recovery, not metrics)\n",
                    ra, rb);
    }
    free(a.out);
    free(b.out);
    /* Once nothing moves: the same numbers. */
    end = now_s() + 10;
    ok = 0;
    while (!ok && now_s() < end) {
        char *again;
        sleep_s(0.3);
        text = stat_text(&f, 0);
        om = get_metrics(&f, 1);
        again = stat_text(&f, 0);
        ok = mgr_tool_stat_value(text, "manager ", "jobs") == 0 &&
             mgr_tool_stat_value(text, "manager ", "groups_made") ==
                 mgr_tool_stat_value(again, "manager ", "groups_made");
        if (ok)
            ok = consistent(&f, text, om) == 0;
        free(text);
        free(om);
        free(again);
    }
    CHECK_MSG(ok, "the metrics never agreed with incoll stat");
    /* The CLI prints what the endpoint serves. */
    om = get_metrics(&f, 1);
    CHECK(run_cmd(&cli, 20,
                  "'%s/incoll' stat --fabric '%s' --format "
                  "openmetrics",
                  test_bindir(), f.dir) == 0);
    om2 = cli;
    for (const char *p = om; *p;) {
        const char *nl = strchr(p, '\n');
        char line[512];
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n < sizeof(line) - 2 && strncmp(p, "incoll_manager_uptime", 21) &&
            strncmp(p, "incoll_manager_connections", 26) &&
            strncmp(p, "incoll_group_age", 16) &&
            strncmp(p, "incoll_an_stats_requests", 24)) {
            memcpy(line, p, n);
            line[n] = '\n';
            line[n + 1] = '\0';
            if (strncmp(line, "incoll_an_", 10) != 0 ||
                strstr(line, "_total{") == NULL)
                CHECK_MSG(strstr(om2, line), "%s", line);
        }
        p = nl ? nl + 1 : p + n;
    }
    free(om);
    free(cli);
    return TEST_PASSED;
}

TEST_LIMIT(integ_ops_metrics_load, TEST_INTEG, 120)
{
    int r;
    if (!mgr_http_available())
        return test_skip("libmicrohttpd-dev is not installed "
                         "(scripts/install-deps.sh)");
    r = load_body();
    stop_all();
    last_fab_down();
    return r;
}

/* The units with this build's paths: `systemd-analyze verify` has nothing
 * to say, and `systemd-analyze security` rates both as well hardened
 * (exposure at most 2.5 of 10). */
TEST(integ_ops_units, TEST_INTEG)
{
    char dir[PATH_MAX], out[PATH_MAX + 32], bindir[PATH_MAX], *text;
    const char *units[] = {"incoll-mgr.service", "incoll-agg@.service"};

    if (!have("/usr/bin/systemd-analyze"))
        return test_skip("systemd is not installed (systemd-analyze)");
    CHECK(test_srcdir()[0] != '\0');
    CHECK(realpath(test_bindir(), bindir) != NULL);
    snprintf(dir, sizeof(dir), "%s/units", test_tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(out, sizeof(out), "%s/out", test_tmpdir());
    for (int i = 0; i < 2; i++)
        CHECK(sh(out,
                 "sed -e 's|@BINDIR@|%s|g' -e 's|@SYSCONFDIR@|%s/etc|g' -e "
                 "'s|@DOCDIR@|/usr/share/doc/incoll|g' '%s/contrib/systemd/%s' "
                 "> '%s/%s'",
                 bindir, dir, test_srcdir(), units[i], dir, units[i]) == 0);
    CHECK(sh(out, "cp '%s/incoll-agg@.service' '%s/incoll-agg@l0.service'", dir,
             dir) == 0);
    CHECK(sh(out,
             "systemd-analyze verify --man=no '%s/incoll-mgr.service' "
             "'%s/incoll-agg@l0.service' 2>&1",
             dir, dir) == 0);
    text = slurp(out);
    CHECK_MSG(text[0] == '\0', "systemd-analyze verify:\n%s", text);
    free(text);
    for (int i = 0; i < 2; i++) {
        const char *u = i ? "incoll-agg@l0.service" : "incoll-mgr.service";
        const char *p;
        CHECK(sh(out, "systemd-analyze security --offline=yes '%s/%s' 2>&1",
                 dir, u) == 0);
        text = slurp(out);
        CHECK_MSG(strstr(text, "Unknown") == NULL, "%s", text);
        p = strstr(text, "Overall exposure level for ");
        CHECK_MSG(p && strchr(p, ':') &&
                      strtod(strchr(p, ':') + 1, NULL) <= 2.5,
                  "%s", p ? p : text);
        fprintf(stderr, "    %.*s\n", (int)strcspn(p, "\n"), p);
        free(text);
    }
    return TEST_PASSED;
}

static int lines_starting(const char *text, const char *prefix)
{
    int n = 0;
    for (const char *p = text; p && *p;) {
        n += strncmp(p, prefix, strlen(prefix)) == 0;
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return n;
}

/* `make install` puts the units, the configuration examples and the Slurm
 * plugin where Debian expects them, with the paths it installed to, never
 * over a configuration that is there; `make uninstall` takes back what it
 * put and keeps what an operator changed. */
TEST(integ_ops_install, TEST_INTEG)
{
    char dest[PATH_MAX], out[PATH_MAX + 32], vars[3 * PATH_MAX + 64];
    char path[2 * PATH_MAX], *text, want_preload[PATH_MAX + 32];
    char libdir[PATH_MAX];
    int slurm = access("/usr/include/slurm/spank.h", F_OK) == 0;
    static const char *const want[] = {
        "lib/systemd/system/incoll-mgr.service",
        "lib/systemd/system/incoll-agg@.service",
        "etc/incoll/mgr.env",
        "etc/incoll/agg.env",
        "etc/incoll/topology.example",
        "usr/share/doc/incoll/deployment.md",
    };

    CHECK(test_srcdir()[0] != '\0');
    snprintf(dest, sizeof(dest), "%s/dest", test_tmpdir());
    snprintf(out, sizeof(out), "%s/install.out", test_tmpdir());
    test_install_vars(dest, vars, sizeof(vars), libdir);
    CHECK(sh(out,
             "mkdir -p '%s/etc/incoll' && echo 'MGR_LISTEN=mine' > "
             "'%s/etc/incoll/mgr.env'",
             dest, dest) == 0);
    if (sh_in(test_srcdir(), out,
              "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install %s",
              vars) != 0) {
        show_tail(out);
        return TEST_FAILED;
    }
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dest, want[i]);
        CHECK_MSG(access(path, F_OK) == 0, "make install did not make %s",
                  path);
    }
    snprintf(path, sizeof(path), "%s/lib/systemd/system/incoll-mgr.service",
             dest);
    text = slurp(path);
    CHECK_MSG(strstr(text, "ExecStart=/usr/bin/incoll-mgr ") &&
                  strstr(text, "LoadCredential=secret:/etc/incoll/secret") &&
                  !strstr(text, "@BINDIR@") && !strstr(text, "@SYSCONFDIR@") &&
                  !strstr(text, "@DOCDIR@"),
              "%s", text);
    free(text);
    snprintf(path, sizeof(path), "%s/etc/incoll/mgr.env", dest);
    text = slurp(path);
    CHECK_MSG(strcmp(text, "MGR_LISTEN=mine\n") == 0,
              "install wrote over a configuration: %s", text);
    free(text);
    if (slurm) {
        snprintf(want_preload, sizeof(want_preload),
                 "preload=%s/libincoll_mpi.so", libdir);
        snprintf(path, sizeof(path),
                 "%s/usr/lib/x86_64-linux-gnu/slurm-wlm/spank_incoll.so", dest);
        CHECK_MSG(access(path, F_OK) == 0, "no %s", path);
        snprintf(path, sizeof(path),
                 "%s/etc/slurm/plugstack.conf.d/incoll.conf.example", dest);
        text = slurp(path);
        CHECK_MSG(strstr(text, "optional /usr/lib/x86_64-linux-gnu/slurm-wlm/"
                               "spank_incoll.so mgr=") &&
                      strstr(text, want_preload),
                  "%s", text);
        free(text);
    }
    CHECK(sh_in(test_srcdir(), out,
                "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s uninstall "
                "%s && find '%s' -type f -o -type l",
                vars, dest) == 0);
    text = slurp(out);
    CHECK_MSG(strstr(text, "keeping") && strstr(text, "etc/incoll/mgr.env") &&
                  lines_starting(text, dest) == 1,
              "%s", text);
    free(text);
    return TEST_PASSED;
}
