/*
 * The build tree and an installed tree work as a user uses them: the
 * program of tests/user/app.c, which includes <incoll.h> alone, is built
 *   - with the README's `cc` line against build/lib, that is the shared
 *     libincoll found through the libincoll.so -> libincoll.so.0 ->
 *     libincoll.so.X.Y.Z links and the rpath (not the archive), and
 *   - with pkg-config against a tree made by `make install PREFIX=...`,
 * and each build runs under `incoll run` on a loopback fabric: every rank
 * gets the exact sums, the world runs in the network, and the ANs count
 * the reductions. Commands run in the source tree (sh_in), where the
 * README's lines are meant to be typed.
 */
#include "integ.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fails the test, showing the command's output file. */
#define CHECK_OUT(cond, out)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            char *t_ = slurp(out);                                             \
            fprintf(stderr, "    %s:%d: check failed: %s; %s:\n%.3000s\n",     \
                    __FILE__, __LINE__, #cond, out, t_);                       \
            free(t_);                                                          \
            return TEST_FAILED;                                                \
        }                                                                      \
    } while (0)

/* The README's line with the words "app.c" and "app" (after -o) replaced
 * by src and exe. */
static int readme_cc_line(const char *src, const char *exe, char *buf,
                          size_t len)
{
    char line[1024], *save = NULL, *w;
    size_t off = 0;
    int after_o = 0;

    if (test_doc_line("README.md", "cc -Iinclude ", line, sizeof(line)) != 0)
        return -1;
    buf[0] = '\0';
    for (w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        const char *word = w;
        if (strcmp(w, "app.c") == 0)
            word = src;
        else if (after_o && strcmp(w, "app") == 0)
            word = exe;
        after_o = strcmp(w, "-o") == 0;
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s",
                                off ? " " : "", word);
    }
    return off < len && strstr(buf, src) && strstr(buf, exe) ? 0 : -1;
}

/* Sum of reductions= over the "an=" lines of `incoll stat`; -1 on error. */
static long reductions(const char *fab, const char *out)
{
    char *text;
    long total = 0;

    if (sh_in(test_srcdir(), out, "build/bin/incoll stat --fabric '%s'", fab) !=
        0)
        return -1;
    text = slurp(out);
    for (const char *p = text; (p = strstr(p, "\nan=")); p++) {
        const char *r = strstr(p, " reductions=");
        if (r)
            total += strtol(r + strlen(" reductions="), NULL, 10);
    }
    free(text);
    return total;
}

/* " WERROR=1" when the tree was built with it by hand (build/.flags) and
 * the environment does not say so: the make of a test then rebuilds
 * nothing (the objects depend on the flags). */
static const char *tree_werror(void)
{
    static char var[16];
    char stamp[PATH_MAX + 16], *flags;
    snprintf(stamp, sizeof(stamp), "%.*s/../.flags", PATH_MAX - 16,
             test_bindir());
    flags = slurp(stamp);
    snprintf(var, sizeof(var), "%s",
             getenv("WERROR") == NULL && flags && strstr(flags, " -Werror ")
                 ? " WERROR=1"
                 : "");
    free(flags);
    return var;
}

/* Runs exe on 4 ranks of fab; checks its verdict and that the ANs
 * reduced more than before. */
static int run_app(const char *fab, const char *exe, const char *out)
{
    long before = reductions(fab, out), after;
    char *text;
    int rc;

    CHECK_OUT(before >= 0, out);
    rc = sh_in(test_srcdir(), out,
               "timeout -k 5 60 build/bin/incoll run -n 4 --fabric '%s' -- "
               "'%s'",
               fab, exe);
    text = slurp(out);
    if (rc != 0 || strstr(text, "app: ok 4 ranks, offloaded") == NULL) {
        fprintf(stderr, "    %s exited %d:\n%.3000s\n", exe, rc, text);
        free(text);
        return TEST_FAILED;
    }
    free(text);
    after = reductions(fab, out);
    CHECK_OUT(after > before, out);
    return TEST_PASSED;
}

static int build_tree_body(const char *fab)
{
    char out[PATH_MAX + 32], exe[PATH_MAX + 32], cmd[2048];
    char inst[PATH_MAX], link[PATH_MAX], path[2 * PATH_MAX + 16];
    struct stat sb;
    ssize_t n;

    snprintf(out, sizeof(out), "%s/cmd.out", test_tmpdir());
    snprintf(exe, sizeof(exe), "%s/app", test_tmpdir());

    /* 1. The build tree, with the README's line. */
    CHECK_MSG(readme_cc_line("tests/user/app.c", exe, cmd, sizeof(cmd)) == 0,
              "README.md has no line `cc -Iinclude app.c -o app ...`");
    CHECK_MSG(strstr(cmd, "-lincoll") && strstr(cmd, "-Lbuild/lib"),
              "the README's line does not link -lincoll from build/lib: %s",
              cmd);
    CHECK_OUT(sh_in(test_srcdir(), out, "%s", cmd) == 0, out);
    /* Linked against the shared library by its soname, found in build/lib
     * at run time. */
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "readelf -d '%s' | grep -q 'NEEDED.*\\[libincoll.so.0\\]' "
                    "&& ldd '%s' | grep -q \"libincoll.so.0 => $(pwd -P)/"
                    "build/lib/libincoll.so.0\"",
                    exe, exe) == 0,
              out);
    CHECK(run_app(fab, exe, out) == TEST_PASSED);

    /* 2. An installed tree: the same links, found through pkg-config. */
    snprintf(inst, sizeof(inst), "%s/prefix", test_tmpdir());
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install "
                    "PREFIX='%s' OMPI_COMPDIR='%s/lib/openmpi'%s",
                    inst, inst, tree_werror()) == 0,
              out);
    snprintf(path, sizeof(path), "%s/lib/libincoll.so", inst);
    n = readlink(path, link, sizeof(link) - 1);
    CHECK_MSG(n > 0, "%s is not a link", path);
    link[n] = '\0';
    CHECK_MSG(strcmp(link, "libincoll.so.0") == 0, "%s -> %s", path, link);
    snprintf(path, sizeof(path), "%s/lib/libincoll.so.0", inst);
    n = readlink(path, link, sizeof(link) - 1);
    CHECK_MSG(n > 0, "%s is not a link", path);
    link[n] = '\0';
    CHECK_MSG(strncmp(link, "libincoll.so.0.", 15) == 0, "%s -> %s", path,
              link);
    snprintf(path, sizeof(path), "%s/lib/%s", inst, link);
    CHECK_MSG(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode), "%s is not a file",
              path);
    snprintf(exe, sizeof(exe), "%s/app-installed", test_tmpdir());
    CHECK_OUT(
        sh_in(test_srcdir(), out,
              "export PKG_CONFIG_PATH='%s/lib/pkgconfig'; "
              "cc tests/user/app.c -o '%s' $(pkg-config --cflags --libs "
              "incoll) -Wl,-rpath,'%s/lib' && "
              "ldd '%s' | grep -q 'libincoll.so.0 => %s/lib/libincoll.so.0'",
              inst, exe, inst, exe, inst) == 0,
        out);
    return run_app(fab, exe, out);
}

TEST(build_tree_shared_lib, TEST_INTEG)
{
    char fab[PATH_MAX], out[PATH_MAX + 32];
    int ret;

    CHECK_MSG(test_srcdir()[0] != '\0', "no source tree above %s (README.md)",
              test_bindir());
    snprintf(fab, sizeof(fab), "%s/fab", test_tmpdir());
    snprintf(out, sizeof(out), "%s/fabric.out", test_tmpdir());
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "build/bin/incoll fabric up --hosts 4 --radix 2 --dir '%s'",
                    fab) == 0,
              out);
    ret = build_tree_body(fab);
    if (sh_in(test_srcdir(), out, "build/bin/incoll fabric down --dir '%s'",
              fab) != 0) {
        fprintf(stderr, "    fabric down --dir %s failed\n", fab);
        ret = TEST_FAILED;
    }
    return ret;
}

/* A packager's install: DESTDIR, prefix and libdir of their own put each
 * file where its directory variable says (the helper programs under
 * libexecdir/incoll), incoll.pc names that libdir and the packages a
 * static link needs (Requires.private), and `make uninstall` with the
 * same variables removes every file it put there. */
TEST(build_tree_install_dirs, TEST_INTEG)
{
    char dest[PATH_MAX], out[PATH_MAX + 32], vars[3 * PATH_MAX];
    char *text;

    CHECK_MSG(test_srcdir()[0] != '\0', "no source tree above %s (README.md)",
              test_bindir());
    snprintf(dest, sizeof(dest), "%s/dest", test_tmpdir());
    snprintf(out, sizeof(out), "%s/install.out", test_tmpdir());
    snprintf(vars, sizeof(vars),
             "DESTDIR='%s' prefix=/usr libdir=/usr/lib/x86_64-linux-gnu "
             "libexecdir=/usr/lib%s",
             dest, tree_werror());
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install "
                    "%s",
                    vars) == 0,
              out);
    static const char *const want[] = {
        "usr/bin/incoll",
        "usr/bin/incoll-agg",
        "usr/lib/x86_64-linux-gnu/libincoll.so.0",
        "usr/lib/x86_64-linux-gnu/libincoll.a",
        "usr/lib/x86_64-linux-gnu/pkgconfig/incoll.pc",
        "usr/include/incoll.h",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char path[2 * PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dest, want[i]);
        CHECK_MSG(access(path, F_OK) == 0, "make install did not make %s",
                  path);
    }
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "export PKG_CONFIG_PATH='%s/usr/lib/x86_64-linux-gnu/"
                    "pkgconfig'; pkg-config --variable=libdir incoll; "
                    "pkg-config --print-requires-private incoll",
                    dest) == 0,
              out);
    text = slurp(out);
    CHECK_MSG(strstr(text, "/usr/lib/x86_64-linux-gnu\n") != NULL &&
                  strstr(text, "libsodium") != NULL,
              "incoll.pc: libdir or Requires.private wrong:\n%s", text);
    free(text);
    CHECK_OUT(sh_in(test_srcdir(), out,
                    "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "
                    "uninstall %s && test -z \"$(find '%s' -type f -o -type "
                    "l)\" || find '%s' -type f -o -type l",
                    vars, dest, dest) == 0,
              out);
    return TEST_PASSED;
}
