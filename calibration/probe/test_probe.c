/* test_probe.c - device-free unit tests of rnicsim-probe: argument parsing, statistics,
 * JSON-lines output and escaping, the bootstrap wire format and TCP helpers, host-info
 * parsing, the sweeps' plans (qps, coro, rpc, arb), the coroutine switch. Needs no RDMA
 * device and no libibverbs. Run with `make test`. */
#include "args.h"
#include "coro.h"
#include "hostinfo.h"
#include "jsonout.h"
#include "net.h"
#include "plan.h"
#include "proto.h"
#include "stats.h"
#include "util.h"
#include "wire.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int g_checks, g_failures;

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        g_checks++;                                                                           \
        if (!(cond)) {                                                                        \
            g_failures++;                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);          \
        }                                                                                     \
    } while (0)

#define CHECK_STR(got, want)                                                                  \
    do {                                                                                      \
        const char *g_ = (got), *w_ = (want);                                                 \
        g_checks++;                                                                           \
        if (strcmp(g_, w_) != 0) {                                                            \
            g_failures++;                                                                     \
            fprintf(stderr, "%s:%d: got  %s\n%*s  want %s\n", __FILE__, __LINE__, g_,         \
                    (int)strlen(__FILE__) + 6, "", w_);                                       \
        }                                                                                     \
    } while (0)

#define CHECK_NEAR(got, want, tol) CHECK(fabs((double)(got) - (double)(want)) <= (tol))

/* ---- argument parsing ---------------------------------------------------------------- */

static int parse(struct probe_args *a, char *err, size_t errlen, ...)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "rnicsim-probe";
    va_list ap;
    va_start(ap, errlen);
    char *s;
    while ((s = va_arg(ap, char *)) != NULL && argc < 31)
        argv[argc++] = s;
    va_end(ap);
    argv[argc] = NULL;
    return probe_parse_args(argc, argv, a, err, errlen);
}

static void test_args(void)
{
    struct probe_args a;
    char err[256];

    CHECK(parse(&a, err, sizeof err, "--help", NULL) == ARGS_HELP);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "-h", NULL) == ARGS_HELP);
    CHECK(parse(&a, err, sizeof err, "--bogus", "--help", NULL) == ARGS_HELP);

    CHECK(parse(&a, err, sizeof err, "--server", NULL) == ARGS_OK);
    CHECK(a.role == ROLE_SERVER);
    CHECK(a.port == PROBE_DEFAULT_PORT);
    CHECK(a.ib_port == 1 && a.gid_index == -1 && a.dev[0] == '\0');
    CHECK(a.sweeps == SWEEPS_ALL);
    CHECK(a.iters == 1000 && a.bw_iters == 20000);
    CHECK_NEAR(a.time_limit, 5.0, 0);

    CHECK(parse(&a, err, sizeof err, "--server", "--port", "4000", "--dev", "mlx5_0", "--once",
                NULL) == ARGS_OK);
    CHECK(a.port == 4000 && strcmp(a.dev, "mlx5_0") == 0 && a.once == 1);

    CHECK(parse(&a, err, sizeof err, "--client", "10.0.0.2", "--port=18000", "--out",
                "x.jsonl", "--sweeps", "lat,qps", "--iters", "50", "--time-limit", "0.5",
                "--gid-index=3", "-q", NULL) == ARGS_OK);
    CHECK(a.role == ROLE_CLIENT);
    CHECK_STR(a.host, "10.0.0.2");
    CHECK(a.port == 18000);
    CHECK_STR(a.out, "x.jsonl");
    CHECK(a.sweeps == ((1u << SW_LAT) | (1u << SW_QPS)));
    CHECK(a.iters == 50);
    CHECK_NEAR(a.time_limit, 0.5, 1e-12);
    CHECK(a.gid_index == 3 && a.quiet == 1);

    /* errors: each returns ARGS_ERROR with a message naming the problem */
    CHECK(parse(&a, err, sizeof err, NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--server or --client") != NULL);
    CHECK(parse(&a, err, sizeof err, "--bogus", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unknown option '--bogus'") != NULL);
    CHECK(parse(&a, err, sizeof err, "-x", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unknown option '-x'") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "stray", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unexpected argument 'stray'") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--client needs a value") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "--port", "1", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--server", "--client", "h", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "choose one") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--server", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--server", "--port", "0", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--port") != NULL && strstr(err, "1..65535") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--port", "70000", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--server", "--port", "12ab", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "expected an integer") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--port=", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--server", "--once=1", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--iters", "0", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--iters", "-5", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--iters", "99999999999999999999",
                NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--time-limit", "0", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--time-limit", "nan", NULL) ==
          ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--time-limit", "2s", NULL) ==
          ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "lat,nope", NULL) ==
          ARGS_ERROR);
    CHECK(strstr(err, "unknown sweep 'nope'") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--once", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--once is a server option") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--out", "f", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--out is a client option") != NULL);

    /* --qps-threads: a client option, 0 (automatic) unless given, 1..1024, never more
     * threads than the qps sweep has QPs, whichever flag comes first */
    CHECK(parse(&a, err, sizeof err, "--client", "h", NULL) == ARGS_OK && a.qps_threads == 0);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", "8", NULL) == ARGS_OK);
    CHECK(a.qps_threads == 8);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads=1", NULL) == ARGS_OK);
    CHECK(a.qps_threads == 1);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", "0", NULL) ==
          ARGS_ERROR);
    CHECK(strstr(err, "--qps-threads: expected an integer in 1..1024, got 0") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", "1025", NULL) ==
          ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", "four", NULL) ==
          ARGS_ERROR);
    CHECK(strstr(err, "--qps-threads: expected an integer, got 'four'") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--qps-threads needs a value") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--qps-threads", "4", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--qps-threads is a client option") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--qps-threads", "8", "--max-qps", "4",
                NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--qps-threads 8 needs at least 8 QPs, but --max-qps is 4") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--max-qps", "4", "--qps-threads", "8",
                NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--max-qps is 4") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--max-qps", "4", "--qps-threads", "4",
                NULL) == ARGS_OK);
    /* the automatic count is capped later, by qps_threaded_count: a small --max-qps alone
     * is fine */
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--max-qps", "2", NULL) == ARGS_OK);

    unsigned m = 0;
    CHECK(parse_sweep_list("all", &m, err, sizeof err) == 0 && m == SWEEPS_ALL);
    CHECK(parse_sweep_list("pages,lat", &m, err, sizeof err) == 0 &&
          m == ((1u << SW_PAGES) | (1u << SW_LAT)));
    CHECK(parse_sweep_list("lat,,bw", &m, err, sizeof err) == -1);
    CHECK(parse_sweep_list("", &m, err, sizeof err) == -1);
    CHECK(parse_sweep_list("lat,", &m, err, sizeof err) == -1);
    CHECK(parse_sweep_list("LAT", &m, err, sizeof err) == -1);
    /* coro: its own sweep, part of all, after pages */
    CHECK(parse_sweep_list("coro", &m, err, sizeof err) == 0 && m == (1u << SW_CORO));
    CHECK(SW_CORO == SW_PAGES + 1 && strcmp(sweep_name(SW_CORO), "coro") == 0);
    CHECK((SWEEPS_ALL & (1u << SW_CORO)) != 0);
    CHECK(parse_sweep_list("all", &m, err, sizeof err) == 0 && (m & (1u << SW_CORO)));
    CHECK(parse_sweep_list("bw,coro", &m, err, sizeof err) == 0 &&
          m == ((1u << SW_BW) | (1u << SW_CORO)));
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "coro", "--bw-iters", "500",
                NULL) == ARGS_OK);
    CHECK(a.sweeps == (1u << SW_CORO) && a.bw_iters == 500);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps=coro", NULL) == ARGS_OK &&
          a.sweeps == (1u << SW_CORO));
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "cor", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unknown sweep 'cor'") != NULL &&
          strstr(err, "pages, coro, rpc, arb)") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--sweeps", "coro", NULL) == ARGS_ERROR);
    /* rpc: its own sweep, part of all, after coro */
    CHECK(parse_sweep_list("rpc", &m, err, sizeof err) == 0 && m == (1u << SW_RPC));
    CHECK(SW_RPC == SW_CORO + 1);
    CHECK(strcmp(sweep_name(SW_RPC), "rpc") == 0);
    CHECK((SWEEPS_ALL & (1u << SW_RPC)) != 0);
    CHECK(parse_sweep_list("all", &m, err, sizeof err) == 0 && (m & (1u << SW_RPC)) &&
          (m & (1u << SW_CORO)));
    CHECK(parse_sweep_list("rpc,lat", &m, err, sizeof err) == 0 &&
          m == ((1u << SW_RPC) | (1u << SW_LAT)));
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps=rpc", "--bw-iters", "512",
                NULL) == ARGS_OK &&
          a.sweeps == (1u << SW_RPC) && a.bw_iters == 512);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "rpcs", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unknown sweep 'rpcs'") != NULL);
    CHECK(parse(&a, err, sizeof err, "--server", "--sweeps", "rpc", NULL) == ARGS_ERROR);
    /* arb: its own sweep, part of all, last in run order (after rpc) */
    CHECK(parse_sweep_list("arb", &m, err, sizeof err) == 0 && m == (1u << SW_ARB));
    CHECK(SW_ARB == SW_COUNT - 1 && SW_ARB == SW_RPC + 1);
    CHECK(strcmp(sweep_name(SW_ARB), "arb") == 0);
    CHECK((SWEEPS_ALL & (1u << SW_ARB)) != 0);
    CHECK(parse_sweep_list("all", &m, err, sizeof err) == 0 && m == SWEEPS_ALL &&
          (m & (1u << SW_ARB)) && (m & (1u << SW_RPC)));
    CHECK(parse_sweep_list("arb,lat", &m, err, sizeof err) == 0 &&
          m == ((1u << SW_ARB) | (1u << SW_LAT)));
    CHECK(parse_sweep_list("rpc,arb", &m, err, sizeof err) == 0 &&
          m == ((1u << SW_RPC) | (1u << SW_ARB)));
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps=arb", "--iters", "50",
                NULL) == ARGS_OK &&
          a.sweeps == (1u << SW_ARB) && a.iters == 50);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "arbs", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "unknown sweep 'arbs'") != NULL &&
          strstr(err, "coro, rpc, arb)") != NULL);
    CHECK(parse(&a, err, sizeof err, "--client", "h", "--sweeps", "ar", NULL) == ARGS_ERROR);
    CHECK(parse(&a, err, sizeof err, "--server", "--sweeps", "arb", NULL) == ARGS_ERROR);
    CHECK(strstr(err, "--sweeps is a client option") != NULL);
    for (int i = 0; i < SW_COUNT; i++)
        CHECK(sweep_from_name(sweep_name(i), strlen(sweep_name(i))) == i);
    CHECK(sweep_from_name("la", 2) == -1);

    /* usage mentions every sweep and the exit status */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        probe_usage(f);
        long n = ftell(f);
        rewind(f);
        char *buf = calloc(1, (size_t)n + 1);
        CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n);
        if (buf) {
            for (int i = 0; i < SW_COUNT; i++)
                CHECK(strstr(buf, sweep_name(i)) != NULL);
            CHECK(strstr(buf, "--time-limit") != NULL && strstr(buf, "exit status") != NULL);
            CHECK(strstr(buf, "--qps-threads N") != NULL);
            CHECK(strstr(buf, "rpc (two-sided RPCs") != NULL);
            /* one line */
            CHECK(strstr(buf, "arb (a 64-B WRITE posted 2 us after a large WRITE on another "
                              "QP: transmit arbitration)\n") != NULL);
        }
        free(buf);
        fclose(f);
    }
}

/* ---- statistics ------------------------------------------------------------------------ */

static void test_stats(void)
{
    struct lat_stats s;
    double v[1000];

    for (int i = 0; i < 100; i++)
        v[i] = (double)(100 - i); /* 100..1, unsorted on purpose */
    CHECK(stats_compute(v, 100, &s) == 0);
    CHECK(s.n == 100);
    CHECK_NEAR(s.min, 1, 0);
    CHECK_NEAR(s.max, 100, 0);
    CHECK_NEAR(s.median, 50.5, 1e-12);
    CHECK_NEAR(s.avg, 50.5, 1e-12);
    CHECK_NEAR(s.stdev, sqrt((100.0 * 100.0 - 1.0) / 12.0), 1e-9); /* population */
    CHECK_NEAR(s.p99, 99, 0);
    CHECK_NEAR(s.p999, 100, 0);
    CHECK(v[0] == 1 && v[99] == 100); /* sorted in place */

    double odd[5] = {5, 1, 3, 2, 4};
    CHECK(stats_compute(odd, 5, &s) == 0);
    CHECK_NEAR(s.median, 3, 0);
    CHECK_NEAR(s.avg, 3, 1e-12);
    CHECK_NEAR(s.stdev, sqrt(2.0), 1e-12);
    CHECK_NEAR(s.p99, 5, 0);

    for (int i = 0; i < 1000; i++)
        v[i] = (double)(i + 1);
    CHECK(stats_compute(v, 1000, &s) == 0);
    CHECK_NEAR(s.p99, 990, 0);  /* rank ceil(0.99 * 1000) = 990 */
    CHECK_NEAR(s.p999, 999, 0); /* rank 999: not the maximum */
    CHECK_NEAR(s.median, 500.5, 1e-12);

    double one[1] = {1.25};
    CHECK(stats_compute(one, 1, &s) == 0);
    CHECK(s.min == 1.25 && s.max == 1.25 && s.median == 1.25 && s.p99 == 1.25 &&
          s.p999 == 1.25 && s.stdev == 0.0);

    double same[4] = {2, 2, 2, 2};
    CHECK(stats_compute(same, 4, &s) == 0 && s.stdev == 0.0 && s.median == 2.0);

    /* equal samples whose rounded sum over n falls an ulp below them: the mean stays
     * within [min, max] */
    for (int i = 0; i < 50; i++)
        v[i] = 0.05;
    CHECK(stats_compute(v, 50, &s) == 0 && s.min <= s.avg && s.avg <= s.max);

    CHECK(stats_compute(v, 0, &s) == -1);
    CHECK(stats_compute(NULL, 3, &s) == -1);
    double bad[3] = {1, NAN, 2};
    CHECK(stats_compute(bad, 3, &s) == -1);
    double inf[2] = {1, INFINITY};
    CHECK(stats_compute(inf, 2, &s) == -1);

    double sorted[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    CHECK(stats_percentile_sorted(sorted, 10, 0.5) == 5);
    CHECK(stats_percentile_sorted(sorted, 10, 0.99) == 10);
    CHECK(stats_percentile_sorted(sorted, 10, 0.1) == 1);
    CHECK(stats_percentile_sorted(sorted, 10, 0.11) == 2);
    CHECK(stats_percentile_sorted(sorted, 10, 1.0) == 10);
    CHECK(stats_percentile_sorted(sorted, 10, 0.0) == 1);
    CHECK(isnan(stats_percentile_sorted(sorted, 0, 0.5)));
}

/* ---- JSON lines ------------------------------------------------------------------------- */

static const char *quoted(const char *s)
{
    static char buf[512];
    json_quote(s, buf, sizeof buf);
    return buf;
}

static void test_json(void)
{
    struct jw w;
    jw_init(&w);

    jw_obj_begin(&w);
    jw_kv_str(&w, "type", "measurement");
    jw_kv_int(&w, "payload", 64);
    jw_kv_int(&w, "neg", -3);
    jw_kv_uint(&w, "big", 18446744073709551615ull);
    jw_kv_bool(&w, "inline", 0);
    jw_kv_bool(&w, "ok", 1);
    jw_kv_null(&w, "nothing");
    jw_kv_str(&w, "nullstr", NULL);
    jw_key(&w, "lat_us");
    jw_obj_begin(&w);
    jw_kv_double(&w, "min", 1.5);
    jw_kv_double(&w, "median", 0.1);
    jw_obj_end(&w);
    jw_key(&w, "list");
    jw_arr_begin(&w);
    jw_str(&w, "a");
    jw_int(&w, 2);
    jw_arr_begin(&w);
    jw_arr_end(&w);
    jw_obj_begin(&w);
    jw_obj_end(&w);
    jw_arr_end(&w);
    jw_obj_end(&w);
    CHECK(jw_complete(&w));
    CHECK_STR(jw_cstr(&w),
              "{\"type\":\"measurement\",\"payload\":64,\"neg\":-3,"
              "\"big\":18446744073709551615,\"inline\":false,\"ok\":true,\"nothing\":null,"
              "\"nullstr\":null,\"lat_us\":{\"min\":1.5,\"median\":0.1},"
              "\"list\":[\"a\",2,[],{}]}");

    /* write_line appends exactly one newline and resets */
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK(jw_write_line(&w, f) == 0);
        CHECK(w.len == 0 && w.depth == 0);
        jw_obj_begin(&w);
        jw_kv_int(&w, "n", 1);
        jw_obj_end(&w);
        CHECK(jw_write_line(&w, f) == 0);
        long n = ftell(f);
        rewind(f);
        char buf[512] = "";
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        CHECK((long)got == n);
        const char *nl = strchr(buf, '\n');
        CHECK(nl != NULL && strcmp(nl + 1, "{\"n\":1}\n") == 0);
        fclose(f);
    }

    /* doubles: shortest exact form; non-finite values are not JSON numbers */
    jw_obj_begin(&w);
    jw_kv_double(&w, "a", 1.74);
    jw_kv_double(&w, "b", 1e300);
    jw_kv_double(&w, "c", NAN);
    jw_kv_double(&w, "d", INFINITY);
    jw_kv_double(&w, "e", -2.5e-7);
    jw_kv_double(&w, "f", 3.0);
    jw_kv_double(&w, "g", 0.1 + 0.2);
    jw_obj_end(&w);
    CHECK_STR(jw_cstr(&w), "{\"a\":1.74,\"b\":1e+300,\"c\":null,\"d\":null,\"e\":-2.5e-07,"
                           "\"f\":3,\"g\":0.30000000000000004}");
    jw_reset(&w);

    /* escaping */
    CHECK_STR(quoted("plain"), "\"plain\"");
    CHECK_STR(quoted(""), "\"\"");
    CHECK_STR(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
    CHECK_STR(quoted("l1\nl2\r\t\b\f"), "\"l1\\nl2\\r\\t\\b\\f\"");
    CHECK_STR(quoted("\x01\x1f\x7f"), "\"\\u0001\\u001f\\u007f\"");
    CHECK_STR(quoted("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
              "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""); /* valid UTF-8 kept */
    CHECK_STR(quoted("bad\xff!"), "\"bad\\ufffd!\"");
    CHECK_STR(quoted("cut\xe2\x82"), "\"cut\\ufffd\\ufffd\"");
    CHECK_STR(quoted("\xc0\xaf"), "\"\\ufffd\\ufffd\"");          /* overlong */
    CHECK_STR(quoted("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\""); /* surrogate */
    CHECK_STR(quoted("</script>"), "\"</script>\"");
    CHECK_STR(quoted(NULL), "\"\"");

    /* keys are escaped too */
    jw_obj_begin(&w);
    jw_kv_str(&w, "k\"ey", "v\n");
    jw_obj_end(&w);
    CHECK_STR(jw_cstr(&w), "{\"k\\\"ey\":\"v\\n\"}");
    jw_reset(&w);

    /* json_quote reports the needed size and truncates safely */
    char small[6];
    size_t need = json_quote("abcdefgh", small, sizeof small);
    CHECK(need == 10);
    CHECK(strlen(small) < sizeof small);
    CHECK(strncmp(small, "\"abcd", strlen(small)) == 0);
    CHECK(json_quote("x\ny", NULL, 0) == 6);

    /* long strings go through the heap path */
    char longs[1000];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    longs[500] = '"';
    jw_str(&w, longs);
    CHECK(jw_complete(&w) && w.len == 998 + 2 + 2); /* 998 x, an escaped quote, the quotes */
    jw_reset(&w);

    /* misuse is detected, and an incomplete value is never written */
    jw_key(&w, "top");
    CHECK(w.err);
    jw_reset(&w);
    jw_int(&w, 1);
    jw_int(&w, 2);
    CHECK(w.err);
    jw_reset(&w);
    jw_obj_begin(&w);
    jw_int(&w, 1); /* value without key inside an object is written but ... */
    jw_obj_end(&w);
    jw_reset(&w);
    jw_obj_begin(&w);
    jw_key(&w, "a");
    jw_obj_end(&w);
    CHECK(w.err);
    jw_reset(&w);
    jw_obj_begin(&w);
    CHECK(!jw_complete(&w));
    FILE *g = tmpfile();
    if (g) {
        CHECK(jw_write_line(&w, g) == -1);
        CHECK(ftell(g) == 0);
        fclose(g);
    }
    jw_reset(&w);
    for (int i = 0; i < JW_MAX_DEPTH + 2; i++)
        jw_arr_begin(&w);
    CHECK(w.err);
    jw_free(&w);
}

/* ---- wire format and protocol messages -------------------------------------------------- */

static void test_wire(void)
{
    struct wbuf b;
    wb_init(&b);
    wb_u8(&b, 0xAB);
    wb_u16(&b, 0x1234);
    wb_u32(&b, 0xDEADBEEF);
    wb_u64(&b, 0x0102030405060708ull);
    wb_str(&b, "hi");
    CHECK(!b.err && b.len == 1 + 2 + 4 + 8 + 4 + 2);
    CHECK(b.p[1] == 0x12 && b.p[2] == 0x34 && b.p[3] == 0xDE); /* big-endian */
    struct rbuf r;
    rb_init(&r, b.p, b.len);
    CHECK(rb_u8(&r) == 0xAB);
    CHECK(rb_u16(&r) == 0x1234);
    CHECK(rb_u32(&r) == 0xDEADBEEF);
    CHECK(rb_u64(&r) == 0x0102030405060708ull);
    char *s = rb_str(&r, 10);
    CHECK(s && strcmp(s, "hi") == 0);
    free(s);
    CHECK(!r.err && r.pos == r.len);
    CHECK(rb_u32(&r) == 0 && r.err); /* reading past the end sets err */
    rb_init(&r, b.p, b.len);
    r.pos = 15;
    CHECK(rb_str(&r, 1) == NULL && r.err); /* longer than max_len */
    wb_free(&b);

    uint8_t h[12];
    uint32_t type, len;
    wire_header(h, MSG_SETUP, 42);
    CHECK(wire_parse_header(h, &type, &len) == 0 && type == MSG_SETUP && len == 42);
    h[0] ^= 1;
    CHECK(wire_parse_header(h, &type, &len) == -1);
    wire_header(h, MSG_SETUP, WIRE_MAX_PAYLOAD + 1);
    CHECK(wire_parse_header(h, &type, &len) == -1);

    /* HELLO round trip */
    struct msg_hello m, o;
    memset(&m, 0, sizeof m);
    m.version = PROTO_VERSION;
    m.port.lid = 7;
    for (int i = 0; i < 16; i++)
        m.port.gid[i] = (uint8_t)i;
    m.port.gid_index = 3;
    m.port.use_grh = 1;
    m.port.mtu = 5;
    m.port.link_layer = 2;
    m.port.max_qp_rd_atom = 16;
    m.port.max_qp_init_rd_atom = 128;
    m.port.max_qp = 262144;
    m.port.max_qp_wr = 16351;
    m.port.max_cqe = 4194303;
    m.idle_timeout_s = 140;
    m.info = "{\"type\":\"host\"}\n";
    wb_init(&b);
    msg_hello_put(&b, &m);
    CHECK(msg_hello_get(b.p, (uint32_t)b.len, &o) == 0);
    CHECK(o.version == PROTO_VERSION && o.port.lid == 7 && o.port.gid[15] == 15 &&
          o.port.gid_index == 3 && o.port.use_grh == 1 && o.port.mtu == 5 &&
          o.port.link_layer == 2 && o.port.max_qp_rd_atom == 16 &&
          o.port.max_qp_init_rd_atom == 128 && o.port.max_qp == 262144 &&
          o.port.max_qp_wr == 16351 && o.port.max_cqe == 4194303 && o.idle_timeout_s == 140);
    CHECK(o.info && strcmp(o.info, m.info) == 0);
    free(o.info);
    CHECK(msg_hello_get(b.p, (uint32_t)b.len - 1, &o) == -1); /* truncated */
    CHECK(o.info == NULL);
    wb_free(&b);

    /* SETUP round trip and validation */
    struct msg_setup su = {TP_UD, 4096, MODE_ECHO, 16, 4096, 2u << 20, 1ull << 30}, su2;
    wb_init(&b);
    msg_setup_put(&b, &su);
    CHECK(msg_setup_get(b.p, (uint32_t)b.len, &su2) == 0);
    CHECK(memcmp(&su, &su2, sizeof su) == 0);
    wb_free(&b);
    su.page_size = 8192;
    wb_init(&b);
    msg_setup_put(&b, &su);
    CHECK(msg_setup_get(b.p, (uint32_t)b.len, &su2) == -1);
    wb_free(&b);
    su.page_size = 4096;
    su.nqps = 0;
    wb_init(&b);
    msg_setup_put(&b, &su);
    CHECK(msg_setup_get(b.p, (uint32_t)b.len, &su2) == -1);
    wb_free(&b);

    /* SETUP_REPLY with QP numbers (24-bit) */
    struct msg_setup_reply rep, rep2;
    memset(&rep, 0, sizeof rep);
    rep.addr = 0x7f0012345000ull;
    rep.rkey = 0x1234;
    rep.region_bytes = 8 << 20;
    rep.page_size = 4096;
    copy_str(rep.backing, sizeof rep.backing, "base");
    CHECK(msg_qps_alloc(&rep.qps, 3) == 0);
    for (uint32_t i = 0; i < 3; i++) {
        rep.qps.qpn[i] = 0x100 + i;
        rep.qps.psn[i] = 0xABCDEF - i;
    }
    wb_init(&b);
    msg_setup_reply_put(&b, &rep);
    CHECK(msg_setup_reply_get(b.p, (uint32_t)b.len, &rep2) == 0);
    CHECK(rep2.status == 0 && rep2.addr == rep.addr && rep2.rkey == 0x1234 &&
          rep2.region_bytes == (8u << 20) && rep2.page_size == 4096 &&
          strcmp(rep2.backing, "base") == 0 && rep2.qps.nqps == 3 &&
          rep2.qps.qpn[2] == 0x102 && rep2.qps.psn[2] == 0xABCDED);
    CHECK(rep2.message && rep2.message[0] == '\0');
    msg_setup_reply_free(&rep2);
    CHECK(msg_setup_reply_get(b.p, (uint32_t)b.len - 4, &rep2) == -1);
    wb_free(&b);
    msg_qps_free(&rep.qps);

    struct msg_status st = {1, 12345, "no hugepages"}, st2;
    wb_init(&b);
    msg_status_put(&b, &st);
    CHECK(msg_status_get(b.p, (uint32_t)b.len, &st2) == 0);
    CHECK(st2.status == 1 && st2.count == 12345 && strcmp(st2.message, "no hugepages") == 0);
    free(st2.message);
    wb_free(&b);

    /* a QP count that does not match the bytes present is rejected */
    wb_init(&b);
    wb_u32(&b, 1000);
    wb_u32(&b, 1);
    rb_init(&r, b.p, b.len);
    struct msg_qps q;
    CHECK(msg_qps_get(&r, &q) == -1 && q.qpn == NULL);
    wb_free(&b);
}

/* ---- TCP helpers ------------------------------------------------------------------------ */

static void test_net(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    const char payload[] = "hello over tcp";
    CHECK(net_send_msg(sv[0], MSG_SETUP, payload, sizeof payload, 1.0) == NET_OK);
    CHECK(net_send_msg(sv[0], MSG_BYE, NULL, 0, 1.0) == NET_OK);
    uint32_t type = 0, len = 0;
    uint8_t *pl = NULL;
    CHECK(net_recv_msg(sv[1], &type, &pl, &len, 1.0) == NET_OK);
    CHECK(type == MSG_SETUP && len == sizeof payload && pl && memcmp(pl, payload, len) == 0);
    free(pl);
    CHECK(net_recv_msg(sv[1], &type, &pl, &len, 1.0) == NET_OK);
    CHECK(type == MSG_BYE && len == 0 && pl == NULL);

    CHECK(net_readable(sv[1]) == 0);
    double t0 = now_s();
    CHECK(net_recv_msg(sv[1], &type, &pl, &len, 0.2) == NET_TIMEOUT);
    double dt = now_s() - t0;
    CHECK(dt >= 0.15 && dt < 2.0);

    /* garbage header */
    CHECK(net_send_all(sv[0], "GARBAGE-HEAD", 12, 1.0) == NET_OK);
    CHECK(net_readable(sv[1]) == 1);
    CHECK(net_recv_msg(sv[1], &type, &pl, &len, 1.0) == NET_ERR);

    close(sv[0]);
    CHECK(net_recv_msg(sv[1], &type, &pl, &len, 1.0) == NET_CLOSED);
    close(sv[1]);

    /* loopback listen/connect/accept */
    char err[256];
    int lfd = -1, port = 0;
    for (int tries = 0; tries < 20 && lfd < 0; tries++) {
        port = 20000 + (int)((unsigned)getpid() * 7u + (unsigned)tries * 131u) % 40000;
        lfd = net_listen(port, err, sizeof err);
    }
    CHECK(lfd >= 0);
    if (lfd >= 0) {
        int cfd = net_connect("127.0.0.1", port, 2.0, err, sizeof err);
        CHECK(cfd >= 0);
        char peer[64] = "";
        int afd = net_accept(lfd, 2.0, peer, sizeof peer);
        CHECK(afd >= 0);
        CHECK(strchr(peer, ':') != NULL);
        if (cfd >= 0 && afd >= 0) {
            CHECK(net_send_msg(cfd, MSG_HELLO, "x", 1, 1.0) == NET_OK);
            CHECK(net_recv_msg(afd, &type, &pl, &len, 1.0) == NET_OK && type == MSG_HELLO);
            free(pl);
        }
        if (cfd >= 0)
            close(cfd);
        if (afd >= 0)
            close(afd);
        CHECK(net_accept(lfd, 0.05, NULL, 0) == NET_TIMEOUT);
        close(lfd);
    }

    /* an unreachable peer fails within the timeout, with a one-line reason */
    int tmp = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    CHECK(bind(tmp, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(getsockname(tmp, (struct sockaddr *)&sa, &sl) == 0);
    int closed_port = ntohs(sa.sin_port);
    close(tmp); /* nothing listens there now */
    t0 = now_s();
    CHECK(net_connect("127.0.0.1", closed_port, 0.5, err, sizeof err) == -1);
    dt = now_s() - t0;
    CHECK(dt < 3.0);
    CHECK(strstr(err, "cannot connect to 127.0.0.1:") != NULL);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(net_connect("no-such-host.invalid", 1, 0.5, err, sizeof err) == -1);
    CHECK(strstr(err, "no-such-host.invalid") != NULL);
}

/* ---- host info and small helpers --------------------------------------------------------- */

static void test_hostinfo(void)
{
    const char *x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 62\n"
                      "model name\t: Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz\n"
                      "cpu MHz\t\t: 1200.000\n\nprocessor\t: 1\n"
                      "model name\t: Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz\n"
                      "cpu MHz\t\t: 2600.000\n";
    struct cpuinfo_summary cs;
    CHECK(cpuinfo_parse(x86, &cs) == 0);
    CHECK_STR(cs.model, "Intel(R) Xeon(R) CPU E5-2650 v2 @ 2.60GHz");
    CHECK_NEAR(cs.mhz, 1200.0, 1e-9);
    CHECK(cs.processors == 2);

    const char *arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\n"
                      "processor\t: 1\nCPU part\t: 0xd0c\n";
    CHECK(cpuinfo_parse(arm, &cs) == 0);
    CHECK_STR(cs.model, "0xd0c");
    CHECK(cs.mhz == 0.0 && cs.processors == 2);
    CHECK(cpuinfo_parse("", &cs) == 0 && cs.model[0] == '\0' && cs.processors == 0);
    CHECK(cpuinfo_parse(NULL, &cs) == 0);

    const char *mi = "MemTotal:       65861432 kB\nMemFree:         1000 kB\n"
                     "HugePages_Total:     512\nHugePages_Free:      500\n"
                     "Hugepagesize:       2048 kB";
    CHECK(meminfo_value(mi, "MemTotal") == 65861432);
    CHECK(meminfo_value(mi, "HugePages_Free") == 500);
    CHECK(meminfo_value(mi, "Hugepagesize") == 2048);
    CHECK(meminfo_value(mi, "Mem") == -1);
    CHECK(meminfo_value(mi, "Absent") == -1);

    /* the live host line is valid, complete JSON */
    struct jw w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_kv_str(&w, "type", "host");
    hostinfo_write_fields(&w);
    jw_obj_end(&w);
    CHECK(jw_complete(&w));
    CHECK(strstr(jw_cstr(&w), "\"kernel\":") != NULL);
    CHECK(strstr(jw_cstr(&w), "\"cpus_online\":") != NULL);
    jw_free(&w);
}

static void test_util(void)
{
    CHECK(ib_mtu_enum_to_bytes(1) == 256 && ib_mtu_enum_to_bytes(3) == 1024 &&
          ib_mtu_enum_to_bytes(5) == 4096 && ib_mtu_enum_to_bytes(6) == -1 &&
          ib_mtu_enum_to_bytes(0) == -1);
    for (int e = 1; e <= 5; e++)
        CHECK(ib_mtu_bytes_to_enum(ib_mtu_enum_to_bytes(e)) == e);
    CHECK(ib_mtu_bytes_to_enum(1500) == 0);
    CHECK(ib_width_to_lanes(1) == 1 && ib_width_to_lanes(2) == 4 && ib_width_to_lanes(8) == 12 &&
          ib_width_to_lanes(16) == 2 && ib_width_to_lanes(3) == 0);
    CHECK_STR(ib_speed_name(4), "QDR");
    CHECK_STR(ib_speed_name(8), "FDR10");
    CHECK_STR(ib_speed_name(16), "FDR");
    CHECK_STR(ib_speed_name(32), "EDR");
    CHECK_STR(ib_speed_name(3), "unknown");
    /* 4x QDR: 40 Gb/s signalling, 32 Gb/s of data after 8b/10b */
    CHECK_NEAR(4 * ib_speed_nominal_gbps(4), 40.0, 1e-9);
    CHECK_NEAR(4 * ib_speed_data_gbps(4), 32.0, 1e-9);
    /* 4x FDR10: also "40" for ibstat, but 40 Gb/s of data (64b/66b) */
    CHECK_NEAR(4 * ib_speed_nominal_gbps(8), 40.0, 1e-9);
    CHECK_NEAR(4 * ib_speed_data_gbps(8), 40.0, 1e-9);
    CHECK_NEAR(4 * ib_speed_data_gbps(16), 54.5454, 1e-3);

    struct rng a, b;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    int same = 1, inrange = 1;
    for (int i = 0; i < 1000; i++) {
        if (rng_next(&a) != rng_next(&b))
            same = 0;
        if (rng_below(&a, 7) >= 7)
            inrange = 0;
        (void)rng_below(&b, 7);
    }
    CHECK(same && inrange);
    rng_seed(&a, 0);
    CHECK(a.s != 0);
    int seen[4] = {0, 0, 0, 0};
    for (int i = 0; i < 400; i++)
        seen[rng_below(&a, 4)]++;
    CHECK(seen[0] > 50 && seen[1] > 50 && seen[2] > 50 && seen[3] > 50);

    CHECK(round_up(0, 4096) == 0 && round_up(1, 4096) == 4096 && round_up(4096, 4096) == 4096 &&
          round_up(4097, 64) == 4160 && round_up(5, 0) == 5);
    char buf[4];
    copy_str(buf, sizeof buf, "abcdef");
    CHECK_STR(buf, "abc");
    copy_str(buf, sizeof buf, NULL);
    CHECK_STR(buf, "");
    uint64_t t1 = now_ns(), t2 = now_ns();
    CHECK(t2 >= t1);
}

/* ---- sweep plan ------------------------------------------------------------------------ */

/* the rpc sweep: its points, warm-up, timed operations and window of requests in flight */
static void test_rpc_plan(void)
{
    /* RC (no cap): 7 windows at batch 1, 3 at batch = window, 4 payloads at window 16 */
    static const struct rpc_shape WANT[RPC_MAX_POINTS] = {
        {1, 1, 64},  {2, 1, 64},   {4, 1, 64},    {8, 1, 64},   {16, 1, 64},
        {32, 1, 64}, {64, 1, 64},  {4, 4, 64},    {16, 16, 64}, {64, 64, 64},
        {16, 1, 16}, {16, 1, 256}, {16, 1, 1024}, {16, 1, 4096},
    };
    struct rpc_shape sh[RPC_MAX_POINTS];
    int n = rpc_points(UINT32_MAX, sh);
    CHECK(n == RPC_MAX_POINTS);
    int same = 1;
    for (int i = 0; i < n && i < RPC_MAX_POINTS; i++) {
        if (sh[i].window != WANT[i].window || sh[i].batch != WANT[i].batch ||
            sh[i].payload != WANT[i].payload)
            same = 0;
        /* the batch divides the window: lists of exactly batch requests */
        if (sh[i].batch < 1 || sh[i].window % sh[i].batch != 0 || sh[i].window > 64)
            same = 0;
    }
    CHECK(same);
    /* UD: payloads up to the path MTU, nothing else left out, the order kept */
    CHECK(rpc_points(4096, sh) == 14);
    CHECK(rpc_points(2048, sh) == 13 && sh[12].payload == 1024 && sh[12].window == 16);
    CHECK(rpc_points(1024, sh) == 13);
    CHECK(rpc_points(512, sh) == 12 && sh[11].payload == 256 && sh[10].payload == 16);
    CHECK(rpc_points(256, sh) == 12 && sh[9].window == 64 && sh[9].batch == 64);
    CHECK(rpc_points(63, sh) == 1 && sh[0].payload == 16 && sh[0].window == 16);

    /* warm-up: min(10000, ops / 10), at least a full window */
    CHECK(rpc_warmup(20000, 1) == 2000 && rpc_warmup(20000, 64) == 2000);
    CHECK(rpc_warmup(10000000, 64) == 10000 && rpc_warmup(400, 64) == 64);
    CHECK(rpc_warmup(512, 16) == 51 && rpc_warmup(1, 1) == 1);
    /* timed echoes: a whole number of lists */
    CHECK(rpc_timed_ops(20000, 1) == 20000 && rpc_timed_ops(20000, 16) == 20000);
    CHECK(rpc_timed_ops(20000, 64) == 20032 && rpc_timed_ops(512, 64) == 512);
    CHECK(rpc_timed_ops(1, 4) == 4 && rpc_timed_ops(0, 1) == 1);

    /* the window: in order, sequence numbers are consecutive and W may be in flight */
    struct rpc_window w;
    CHECK(rpc_window_init(&w, 4) == 0);
    CHECK(w.ring == 8 && w.outstanding == 0);
    CHECK(rpc_window_room(&w, 4) && !rpc_window_room(&w, 5));
    for (uint32_t i = 0; i < 4; i++)
        CHECK(rpc_window_post(&w, 1000 + i) == i);
    CHECK(w.outstanding == 4 && !rpc_window_room(&w, 1) && rpc_window_room(&w, 0));
    CHECK(rpc_window_echo(&w, 0) == 1 && w.outstanding == 3 && rpc_window_room(&w, 1));
    CHECK(rpc_window_echo(&w, 0) == 0 && w.outstanding == 3); /* a duplicate */
    CHECK(rpc_window_echo(&w, 9) == 0 && rpc_window_echo(&w, 77) == 0); /* never posted */
    CHECK(rpc_window_post(&w, 2000) == 4);
    /* nothing is overdue before its timeout, however long the others waited */
    CHECK(rpc_window_expire(&w, 1000 + 500, 500) == 0 && w.outstanding == 4);
    /* requests 1 and 2 (posted at 1001, 1002) are overdue at 1503: they leave the
     * window; 3 (posted at 1003) is exactly at its timeout and stays */
    CHECK(rpc_window_expire(&w, 1503, 500) == 2 && w.outstanding == 2);
    CHECK(rpc_window_echo(&w, 3) == 1 && w.outstanding == 1);
    /* a late echo of a request given up on matches nothing */
    CHECK(rpc_window_echo(&w, 1) == 0 && rpc_window_echo(&w, 2) == 0);
    CHECK(rpc_window_echo(&w, 4) == 1 && w.outstanding == 0);
    rpc_window_free(&w);

    /* an overdue request keeps its slot; the others flow around it, their sequence
     * numbers skipping that slot, for as long as it takes (no bound on the span) */
    CHECK(rpc_window_init(&w, 2) == 0);
    CHECK(w.ring == 4);
    uint32_t stuck = rpc_window_post(&w, 10); /* never answered */
    CHECK(stuck == 0);
    int flowing = 1, skipped_its_slot = 1;
    uint32_t last = stuck;
    for (int i = 0; i < 1000; i++) {
        if (!rpc_window_room(&w, 1))
            flowing = 0;
        uint32_t q = rpc_window_post(&w, 20 + (uint64_t)i);
        if (q <= last || (q & (w.ring - 1)) == (stuck & (w.ring - 1)))
            skipped_its_slot = 0;
        last = q;
        if (rpc_window_echo(&w, q) != 1)
            flowing = 0;
    }
    CHECK(flowing && skipped_its_slot && w.outstanding == 1);
    CHECK(rpc_window_expire(&w, 10 + 200, 200) == 0 && rpc_window_expire(&w, 211, 200) == 1);
    CHECK(w.outstanding == 0 && rpc_window_echo(&w, stuck) == 0);
    /* out of order echoes match their own requests */
    uint32_t a = rpc_window_post(&w, 300), b = rpc_window_post(&w, 301);
    CHECK(b == a + 1 && !rpc_window_room(&w, 1));
    CHECK(rpc_window_echo(&w, b) == 1 && rpc_window_echo(&w, a) == 1 && w.outstanding == 0);
    rpc_window_free(&w);

    /* the largest window: 64 in flight, a ring of 128 */
    CHECK(rpc_window_init(&w, 64) == 0 && w.ring == 128);
    for (int i = 0; i < 64; i++)
        rpc_window_post(&w, 5);
    CHECK(w.outstanding == 64 && !rpc_window_room(&w, 1));
    CHECK(rpc_window_expire(&w, 6, 0) == 64 && w.outstanding == 0 && rpc_window_room(&w, 64));
    rpc_window_free(&w);
    CHECK(rpc_window_init(&w, 0) == 0 && w.window == 1); /* at least one */
    rpc_window_free(&w);
}

static void test_plan(void)
{
    /* default: 4 posting threads, at most one per online CPU */
    CHECK(qps_threads_default(64) == 4 && qps_threads_default(4) == 4);
    CHECK(qps_threads_default(2) == 2 && qps_threads_default(1) == 1);
    CHECK(qps_threads_default(0) == 1 && qps_threads_default(-1) == 1);

    /* depth per QP of the qps sweep: about 256 in flight from 16 QPs on, 2..16 per QP */
    CHECK(qps_sweep_depth(1) == 16 && qps_sweep_depth(16) == 16 && qps_sweep_depth(32) == 8);
    CHECK(qps_sweep_depth(64) == 4 && qps_sweep_depth(128) == 2 && qps_sweep_depth(4096) == 2);
    CHECK(qps_sweep_depth(100) == 2 && qps_sweep_depth(0) == 16);

    /* the several-thread point: none below T QPs or with one thread; else a multiple of T */
    CHECK(qps_threaded_count(1, 4) == 0 && qps_threaded_count(2, 4) == 0);
    CHECK(qps_threaded_count(4, 4) == 4 && qps_threaded_count(128, 4) == 128);
    CHECK(qps_threaded_count(4030, 4) == 4028 && qps_threaded_count(7, 3) == 6);
    CHECK(qps_threaded_count(64, 1) == 0 && qps_threaded_count(64, 0) == 0);
    for (long n = 1; n <= 5000; n = n * 2 + (n % 3)) /* powers of two and odd caps alike */
        for (int t = 2; t <= 16; t++) {
            long q = qps_threaded_count(n, t);
            CHECK(q == 0 ? n < t : (q % t == 0 && q <= n && q > n - t && q >= t));
        }

    /* the split of a point's QPs over its threads (and CQs): contiguous blocks that cover
     * every QP exactly once, qp_block_of agreeing with qp_block_range, n/T QPs each when
     * T divides n - QP i on thread i / (n / T), as in the simulator's experiment */
    static const int NS[] = {1, 4, 7, 8, 64, 100, 128, 4028};
    for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++)
        for (int T = 1; T <= 16 && T <= NS[k]; T++) {
            int n = NS[k], next = 0, ok = 1;
            for (int b = 0; b < T; b++) {
                int first, count;
                qp_block_range(n, T, b, &first, &count);
                if (first != next || count < 0)
                    ok = 0;
                if (n % T == 0 && count != n / T)
                    ok = 0;
                for (int i = first; i < first + count; i++)
                    if (qp_block_of(n, T, i) != b || (n % T == 0 && i / (n / T) != b))
                        ok = 0;
                next = first + count;
            }
            CHECK(ok && next == n);
        }
    int first, count;
    qp_block_range(128, 4, 1, &first, &count);
    CHECK(first == 32 && count == 32);
    CHECK(qp_block_of(128, 4, 31) == 0 && qp_block_of(128, 4, 32) == 1);
    CHECK(qp_block_of(128, 4, 127) == 3);
    /* not interleaved: the old i % T would have put QP 1 on thread 1 */
    CHECK(qp_block_of(8, 4, 1) == 0 && qp_block_of(8, 4, 2) == 1);
    /* a single block (one thread, one CQ) holds everything */
    qp_block_range(64, 1, 0, &first, &count);
    CHECK(first == 0 && count == 64 && qp_block_of(64, 1, 63) == 0);

    /* the coro sweep's warm-up: min(10000, ops / 10), at least one per coroutine */
    CHECK(coro_warmup(20000, 1) == 2000 && coro_warmup(20000, 32) == 2000);
    CHECK(coro_warmup(100000, 8) == 10000 && coro_warmup(10000000, 32) == 10000);
    CHECK(coro_warmup(400, 1) == 40 && coro_warmup(400, 32) == 40);
    CHECK(coro_warmup(100, 32) == 32 && coro_warmup(5, 1) == 1 && coro_warmup(1, 2) == 2);
    /* a per-QP CQ split is the block split with one QP per block: QP k on CQ k */
    for (int k = 0; k < 32; k++)
        CHECK(qp_block_of(32, 32, k) == k);
}

/* ---- coroutines ------------------------------------------------------------------------ */

/* yields n times; its locals (an integer and a double, live across every yield) must come
 * back as it left them */
struct yielder {
    int n;
    int at;          /* the iteration it last yielded from */
    long final_sum;  /* its local sum when it returned */
    double final_f;
    char text[32];   /* printf of a double inside the coroutine: needs an aligned stack */
};

static void yielder_body(struct coro *co, void *arg)
{
    struct yielder *y = arg;
    long sum = 1000;
    double f = 0.5;
    snprintf(y->text, sizeof y->text, "%.3f", f * 3.0);
    for (int i = 0; i < y->n; i++) {
        y->at = i;
        coro_yield(co);
        sum += i;
        f *= 2.0;
    }
    y->final_sum = sum;
    y->final_f = f;
}

/* appends 100 x id + step to a shared log at every step, yielding between steps */
struct logger {
    int id, steps;
    int *log, *nlog;
};

static void logger_body(struct coro *co, void *arg)
{
    struct logger *l = arg;
    for (int s = 0; s < l->steps; s++) {
        l->log[(*l->nlog)++] = 100 * l->id + s;
        coro_yield(co);
    }
}

/* fills 16 KiB of its own stack with a pattern of its id, yields, and checks the pattern
 * after the other coroutine did the same on its stack */
struct filler {
    int id;
    uintptr_t local_addr; /* address of its array: must lie on its own stack */
    int intact;
};

static void filler_body(struct coro *co, void *arg)
{
    struct filler *f = arg;
    volatile unsigned char buf[16384];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(f->id * 37 + i);
    f->local_addr = (uintptr_t)&buf[0];
    coro_yield(co);
    int ok = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        if (buf[i] != (unsigned char)(f->id * 37 + i))
            ok = 0;
    f->intact = ok;
}

static int on_stack(const struct coro *co, uintptr_t p)
{
    uintptr_t lo = (uintptr_t)co->stack;
    return p >= lo && p < lo + CORO_STACK_BYTES;
}

/* Callee-saved registers across a resume, checked in asm: rnp_test_regs_kept(fn, arg)
 * loads a distinct pattern into every callee-saved register (x86-64: rbx, rbp, r12-r15;
 * aarch64: x19-x29, d8-d15), calls fn(arg) and returns a bit mask of the registers that
 * did not come back (0: all kept). fn resumes a coroutine whose body zeroes those
 * registers (telling the compiler, so that the body itself stays correct) and yields
 * with them zeroed: only the switch can restore the scheduler's values. */
#if defined(__linux__) && defined(__ELF__) && \
    ((defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__))
#define TEST_REGS 1
unsigned rnp_test_regs_kept(void (*fn)(void *), void *arg);
#if defined(__x86_64__)
#define REG_CHECK(reg, val, bit)                                                              \
    "    movabsq $" val ", %rcx\n"                                                          \
    "    cmpq %rcx, %" reg "\n"                                                             \
    "    je 1f\n"                                                                             \
    "    orl $" bit ", %eax\n"                                                              \
    "1:\n"
__asm__(".pushsection .text\n"
        ".globl rnp_test_regs_kept\n"
        ".hidden rnp_test_regs_kept\n"
        ".type rnp_test_regs_kept,@function\n"
        "rnp_test_regs_kept:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n" /* 16-byte aligned for the call */
        "    movabsq $0x0101010101010101, %rbx\n"
        "    movabsq $0x0202020202020202, %rbp\n"
        "    movabsq $0x0303030303030303, %r12\n"
        "    movabsq $0x0404040404040404, %r13\n"
        "    movabsq $0x0505050505050505, %r14\n"
        "    movabsq $0x0606060606060606, %r15\n"
        "    movq %rdi, %rax\n"
        "    movq %rsi, %rdi\n"
        "    callq *%rax\n"
        "    xorl %eax, %eax\n"
        REG_CHECK("rbx", "0x0101010101010101", "1")
        REG_CHECK("rbp", "0x0202020202020202", "2")
        REG_CHECK("r12", "0x0303030303030303", "4")
        REG_CHECK("r13", "0x0404040404040404", "8")
        REG_CHECK("r14", "0x0505050505050505", "16")
        REG_CHECK("r15", "0x0606060606060606", "32")
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size rnp_test_regs_kept,.-rnp_test_regs_kept\n"
        ".popsection\n");

static void clobber_body(struct coro *co, void *arg)
{
    (void)arg;
    for (;;) {
        __asm__ volatile("xorl %%ebx, %%ebx\n"
                         "xorl %%r12d, %%r12d\n"
                         "xorl %%r13d, %%r13d\n"
                         "xorl %%r14d, %%r14d\n"
                         "xorl %%r15d, %%r15d\n" ::: "rbx", "r12", "r13", "r14", "r15");
        coro_yield(co);
    }
}
#else /* __aarch64__ */
/* x9 holds the pattern of register n: 0x0101.. x n, built from x10 = 0x0101010101010101 */
#define REG_SET(reg, n) "    mov x9, #" #n "\n    mul x9, x9, x10\n    mov " reg ", x9\n"
#define REG_SETD(reg, n) "    mov x9, #" #n "\n    mul x9, x9, x10\n    fmov " reg ", x9\n"
#define REG_CHECK(reg, n, bit)                                                                \
    "    mov x9, #" #n "\n    mul x9, x9, x10\n    cmp " reg ", x9\n    b.eq 1f\n"           \
    "    orr w0, w0, #" #bit "\n1:\n"
#define REG_CHECKD(reg, n, bit)                                                               \
    "    mov x9, #" #n "\n    mul x9, x9, x10\n    fmov x11, " reg "\n    cmp x11, x9\n"     \
    "    b.eq 1f\n    orr w0, w0, #" #bit "\n1:\n"
__asm__(".pushsection .text\n"
        ".globl rnp_test_regs_kept\n"
        ".hidden rnp_test_regs_kept\n"
        ".type rnp_test_regs_kept,%function\n"
        "rnp_test_regs_kept:\n"
        CORO_A64_SAVE_CALLEE
        "    mov x12, x0\n"
        "    mov x0, x1\n"
        "    mov x10, #0x0101\n"
        "    movk x10, #0x0101, lsl #16\n"
        "    movk x10, #0x0101, lsl #32\n"
        "    movk x10, #0x0101, lsl #48\n"
        REG_SET("x19", 1) REG_SET("x20", 2) REG_SET("x21", 3) REG_SET("x22", 4)
        REG_SET("x23", 5) REG_SET("x24", 6) REG_SET("x25", 7) REG_SET("x26", 8)
        REG_SET("x27", 9) REG_SET("x28", 10)
        REG_SETD("d8", 11) REG_SETD("d9", 12) REG_SETD("d10", 13) REG_SETD("d11", 14)
        REG_SETD("d12", 15) REG_SETD("d13", 16) REG_SETD("d14", 17) REG_SETD("d15", 18)
        "    blr x12\n"
        "    mov x10, #0x0101\n"
        "    movk x10, #0x0101, lsl #16\n"
        "    movk x10, #0x0101, lsl #32\n"
        "    movk x10, #0x0101, lsl #48\n"
        "    mov w0, #0\n"
        REG_CHECK("x19", 1, 1) REG_CHECK("x20", 2, 2) REG_CHECK("x21", 3, 4)
        REG_CHECK("x22", 4, 8) REG_CHECK("x23", 5, 16) REG_CHECK("x24", 6, 32)
        REG_CHECK("x25", 7, 64) REG_CHECK("x26", 8, 128) REG_CHECK("x27", 9, 256)
        REG_CHECK("x28", 10, 512)
        REG_CHECKD("d8", 11, 1024) REG_CHECKD("d9", 12, 2048) REG_CHECKD("d10", 13, 4096)
        REG_CHECKD("d11", 14, 8192) REG_CHECKD("d12", 15, 16384)
        REG_CHECKD("d13", 16, 32768) REG_CHECKD("d14", 17, 65536)
        REG_CHECKD("d15", 18, 131072)
        CORO_A64_RESTORE_CALLEE
        "    ret\n"
        ".size rnp_test_regs_kept,.-rnp_test_regs_kept\n"
        ".popsection\n");

static void clobber_body(struct coro *co, void *arg)
{
    (void)arg;
    for (;;) {
        __asm__ volatile("mov x19, #0\n mov x20, #0\n mov x21, #0\n mov x22, #0\n"
                         "mov x23, #0\n mov x24, #0\n mov x25, #0\n mov x26, #0\n"
                         "mov x27, #0\n mov x28, #0\n"
                         "fmov d8, xzr\n fmov d9, xzr\n fmov d10, xzr\n fmov d11, xzr\n"
                         "fmov d12, xzr\n fmov d13, xzr\n fmov d14, xzr\n fmov d15, xzr\n"
                         ::: "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
                           "x28", "d8", "d9", "d10", "d11", "d12", "d13", "d14", "d15");
        coro_yield(co);
    }
}
#endif

static void resume_it(void *co)
{
    coro_resume(co);
}
#else
#define TEST_REGS 0
#endif

static void test_coro_impl(int impl)
{
    /* N yields: back in the scheduler after each one, the coroutine's locals intact and
     * the scheduler's own (several live across every switch) too */
    struct yielder y;
    memset(&y, 0, sizeof y);
    y.n = 50;
    y.at = -1;
    struct coro co;
    CHECK(coro_init(&co, impl, yielder_body, &y) == 0);
    CHECK(co.impl == impl && !co.done && co.stack != NULL);
    long a = 7, b = 11, cc = 13, d = 17, e = 19;
    double fa = 1.25, fb = -3.5;
    int in_order = 1;
    for (int i = 0; i < y.n; i++) {
        coro_resume(&co);
        if (co.done || y.at != i)
            in_order = 0;
        a += 1;
        b *= 3;
        cc ^= (long)i;
        d += a;
        e -= b;
        fa *= 1.5;
        fb += fa;
    }
    CHECK(in_order);
    CHECK(!co.done && y.final_sum == 0);
    coro_resume(&co); /* the last: the body returns */
    CHECK(co.done);
    CHECK(y.final_sum == 1000 + 49 * 50 / 2);
    CHECK_NEAR(y.final_f, 0.5 * pow(2.0, 50), 0);
    CHECK_STR(y.text, "1.500");
    /* the same arithmetic without switches */
    long a2 = 7, b2 = 11, c2 = 13, d2 = 17, e2 = 19;
    double fa2 = 1.25, fb2 = -3.5;
    for (int i = 0; i < y.n; i++) {
        a2 += 1;
        b2 *= 3;
        c2 ^= (long)i;
        d2 += a2;
        e2 -= b2;
        fa2 *= 1.5;
        fb2 += fa2;
    }
    CHECK(a == a2 && b == b2 && cc == c2 && d == d2 && e == e2);
    CHECK(fa == fa2 && fb == fb2);
    coro_resume(&co); /* a finished coroutine: nothing happens */
    CHECK(co.done && y.final_sum == 1000 + 49 * 50 / 2);
    coro_free(&co);
    CHECK(co.stack == NULL);

    /* two coroutines interleave in the order the scheduler resumes them */
    int log[64], nlog = 0;
    struct logger la = {0, 4, log, &nlog}, lb = {1, 4, log, &nlog};
    struct coro ca, cb;
    CHECK(coro_init(&ca, impl, logger_body, &la) == 0);
    CHECK(coro_init(&cb, impl, logger_body, &lb) == 0);
    for (int r = 0; r < 5; r++) {
        coro_resume(&ca);
        coro_resume(&cb);
    }
    CHECK(ca.done && cb.done && nlog == 8);
    static const int WANT[] = {0, 100, 1, 101, 2, 102, 3, 103};
    int same = nlog == 8;
    for (int i = 0; same && i < 8; i++)
        same = log[i] == WANT[i];
    CHECK(same);
    /* another order: A twice, then B to its end, then A to its end */
    nlog = 0;
    coro_free(&ca);
    coro_free(&cb);
    CHECK(coro_init(&ca, impl, logger_body, &la) == 0);
    CHECK(coro_init(&cb, impl, logger_body, &lb) == 0);
    coro_resume(&ca);
    coro_resume(&ca);
    for (int r = 0; r < 5; r++)
        coro_resume(&cb);
    for (int r = 0; r < 3; r++)
        coro_resume(&ca);
    static const int WANT2[] = {0, 1, 100, 101, 102, 103, 2, 3};
    same = nlog == 8 && ca.done && cb.done;
    for (int i = 0; same && i < 8; i++)
        same = log[i] == WANT2[i];
    CHECK(same);
    coro_free(&ca);
    coro_free(&cb);

    /* the stack of one does not clobber the other's */
    struct filler f1 = {1, 0, 0}, f2 = {2, 0, 0};
    struct coro c1, c2x;
    CHECK(coro_init(&c1, impl, filler_body, &f1) == 0);
    CHECK(coro_init(&c2x, impl, filler_body, &f2) == 0);
    coro_resume(&c1);
    coro_resume(&c2x);
    CHECK(on_stack(&c1, f1.local_addr) && on_stack(&c2x, f2.local_addr));
    CHECK(!on_stack(&c1, f2.local_addr) && !on_stack(&c2x, f1.local_addr));
    coro_resume(&c2x); /* the second checks first: the first filled its stack before */
    coro_resume(&c1);
    CHECK(c1.done && c2x.done && f1.intact && f2.intact);
    coro_free(&c1);
    coro_free(&c2x);

#if TEST_REGS
    /* every callee-saved register of the scheduler survives a resume (the first, which
     * enters the body, and later ones, which come back into its yield) */
    struct coro cr;
    CHECK(coro_init(&cr, impl, clobber_body, NULL) == 0);
    unsigned lost = 0;
    for (int i = 0; i < 3; i++)
        lost |= rnp_test_regs_kept(resume_it, &cr);
    CHECK(lost == 0);
    if (lost)
        fprintf(stderr, "  %s switch: registers not kept across a resume: mask 0x%x\n",
                coro_impl_name(impl), lost);
    coro_free(&cr); /* suspended in its endless loop: dropped */
#endif

    /* the bare switch point, small */
    double el = -1;
    CHECK(coro_bench_switch(3, impl, 10, 1000, &el) == 0 && el > 0 && el < 10.0);
    CHECK(coro_bench_switch(1, impl, 0, 1, &el) == 0 && el >= 0);
    CHECK(coro_bench_switch(0, impl, 10, 10, &el) == -1);
}

static void test_coro(void)
{
    CHECK_STR(coro_impl_name(CORO_IMPL_ASM), "asm");
    CHECK_STR(coro_impl_name(CORO_IMPL_UCONTEXT), "ucontext");
    CHECK_STR(coro_impl_name(CORO_IMPL_AUTO), "?");
    int asm_ok = coro_asm_available();
    CHECK(coro_default_impl() == (asm_ok ? CORO_IMPL_ASM : CORO_IMPL_UCONTEXT));
#if defined(__linux__) && ((defined(__x86_64__) && !defined(__ILP32__)) || defined(__aarch64__))
    /* the architectures with an asm switch: this test machine has no shadow stack */
    CHECK(asm_ok);
#endif
    struct coro co;
    CHECK(coro_init(&co, 99, NULL, NULL) == -1 && co.stack == NULL);
    CHECK(coro_init(&co, CORO_IMPL_AUTO, logger_body, NULL) == 0);
    CHECK(co.impl == coro_default_impl());
    coro_free(&co); /* never started: dropped */
    if (asm_ok)
        test_coro_impl(CORO_IMPL_ASM);
    else
        CHECK(coro_init(&co, CORO_IMPL_ASM, logger_body, NULL) == -1);
    test_coro_impl(CORO_IMPL_UCONTEXT);
}

static void test_arb_plan(void)
{
    /* the large WRITE's sizes, in run order: none first (the 64-B WRITE alone) */
    uint32_t b[ARB_POINTS + 1];
    memset(b, 0xff, sizeof b);
    CHECK(arb_points(b) == ARB_POINTS && ARB_POINTS == 4);
    CHECK(b[0] == 0 && b[1] == 65536 && b[2] == 262144 && b[3] == 1048576);
    CHECK(ARB_GAP_NS == 2000u);
    CHECK(b[ARB_POINTS] == 0xffffffffu); /* nothing written past the points */
    /* the timed WRITE (offset 0) and the large one (from ARB_BIG_OFFSET) share no page */
    CHECK(ARB_SMALL_BYTES == 64 && ARB_BIG_OFFSET == 4096 && ARB_SMALL_BYTES <= ARB_BIG_OFFSET);
    /* the regions: whole pages that hold both WRITEs, one page for the 64-B WRITE alone */
    CHECK(arb_region_bytes(0) == 4096);
    CHECK(arb_region_bytes(4096) == 8192);
    CHECK(arb_region_bytes(65536) == 69632);
    CHECK(arb_region_bytes(1048576) == 1052672);
    CHECK(arb_region_bytes(1) == 8192 && arb_region_bytes(4097) == 12288);
    int fits = 1;
    for (int i = 0; i < ARB_POINTS; i++) {
        uint64_t r = arb_region_bytes(b[i]);
        if (r % 4096 != 0 || r < ARB_SMALL_BYTES || r < (uint64_t)ARB_BIG_OFFSET + b[i] ||
            r >= (uint64_t)ARB_BIG_OFFSET + b[i] + 4096)
            fits = 0;
    }
    CHECK(fits);
}

int main(void)
{
    test_args();
    test_stats();
    test_json();
    test_wire();
    test_net();
    test_hostinfo();
    test_util();
    test_plan();
    test_rpc_plan();
    test_arb_plan();
    test_coro();
    printf("test_probe: %d checks, %d failures\n", g_checks, g_failures);
    return g_failures ? 1 : 0;
}
