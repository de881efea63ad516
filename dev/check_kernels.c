// check_kernels.c — compile the embedded kernel program with NVRTC for sm_80 and sm_90a; no GPU.
//
//     cc -std=c99 -Wall -Wextra -Wpedantic -Werror -I. -o dev/check_kernels
//         dev/check_kernels.c -ldl
//     dev/check_kernels
//
// Reads the sources from fat5_kernels.cuh (so it checks exactly what the library embeds) and
// builds the program the way the runtime does: every kernel file, in table order, joined into one
// source, each file preceded by `#line 1 "kernels/<name>"` so NVRTC messages point into the .cu
// file. As the runtime does, the program is compiled as parts ("#define FAT5_PART k" before it, k
// = 0 .. the largest FAT5_IN_PART(k) of the files: kernels/00_common.cu), each an NVRTC program
// of its own, in both activation variants (-DFAT5_ACT_BF16=0 and =1) for each of sm_80 and sm_90a
// (what the runtime compiles on H100 and H200: plain sm_90 is the same program without the bodies
// of attention_wg.cu's kernels),
// with --std=c++17 -default-device; one line is printed per (variant, arch, part). The compiles
// run in parallel child processes, as many at a time as there are online CPUs (FAT5_CHECK_JOBS=N
// overrides); their output is printed in the fixed order.
// NVRTC is loaded with dlopen: no CUDA headers or libraries are needed to build this.
//
// FAT5_CHECK_RESOURCES=1 adds -Xptxas=-v: ptxas's resource report (registers, stack, spill stores
// and loads of every entry point) is then printed after each (variant, arch, part) line.
// FAT5_CHECK_PARTS=a,b,... compiles those parts alone (for a quick look at one kernel file).
//
// Exit status: 0 all compiled, 1 a compile error (log printed), 2 NVRTC could not be loaded or
// used. Without NVRTC the check is skipped (a "check-kernels: SKIP (no NVRTC: ...)" line, exit 0)
// unless the environment variable FAT5_REQUIRE_NVRTC is set to anything but "0" (CI sets it to 1),
// in which case a missing NVRTC is exit status 2.

#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fat5_kernels.cuh"

// Mirrors of the few NVRTC declarations used here (nvrtc.h, CUDA 11.2+).
typedef int nvrtcResult;  // NVRTC_SUCCESS = 0
typedef struct check_nvrtc_program *nvrtcProgram;  // opaque
typedef nvrtcResult (*nvrtcVersion_fn)(int *major, int *minor);
typedef const char *(*nvrtcGetErrorString_fn)(nvrtcResult result);
typedef nvrtcResult (*nvrtcCreateProgram_fn)(nvrtcProgram *prog, const char *src, const char *name,
                                             int num_headers, const char *const *headers,
                                             const char *const *include_names);
typedef nvrtcResult (*nvrtcCompileProgram_fn)(nvrtcProgram prog, int num_options,
                                              const char *const *options);
typedef nvrtcResult (*nvrtcGetProgramLogSize_fn)(nvrtcProgram prog, size_t *log_size);
typedef nvrtcResult (*nvrtcGetProgramLog_fn)(nvrtcProgram prog, char *log);
typedef nvrtcResult (*nvrtcGetCUBINSize_fn)(nvrtcProgram prog, size_t *cubin_size);
typedef nvrtcResult (*nvrtcDestroyProgram_fn)(nvrtcProgram *prog);

static struct {
    nvrtcVersion_fn Version;
    nvrtcGetErrorString_fn GetErrorString;
    nvrtcCreateProgram_fn CreateProgram;
    nvrtcCompileProgram_fn CompileProgram;
    nvrtcGetProgramLogSize_fn GetProgramLogSize;
    nvrtcGetProgramLog_fn GetProgramLog;
    nvrtcGetCUBINSize_fn GetCUBINSize;
    nvrtcDestroyProgram_fn DestroyProgram;
} nvrtc;

// dlsym returns void *, and ISO C has no conversion from that to a function pointer: go through a
// union to a generic function pointer, then cast (function pointer to function pointer is defined).
typedef void (*generic_fn)(void);
typedef union sym_cast { void *obj; generic_fn fn; } sym_cast;

static generic_fn load_sym(void *lib, const char *name)
{
    sym_cast u;
    dlerror();
    u.obj = dlsym(lib, name);
    if (!u.obj) {
        const char *err = dlerror();
        fprintf(stderr, "check_kernels: %s\n", err ? err : name);
        return NULL;
    }
    return u.fn;
}

#define LOAD(field, type, name)                                                                    \
    do {                                                                                           \
        generic_fn fn_ = load_sym(lib, name);                                                      \
        if (!fn_) return 0;                                                                        \
        nvrtc.field = (type)fn_;                                                                   \
    } while (0)

static int load_nvrtc(void *lib)
{
    LOAD(Version, nvrtcVersion_fn, "nvrtcVersion");
    LOAD(GetErrorString, nvrtcGetErrorString_fn, "nvrtcGetErrorString");
    LOAD(CreateProgram, nvrtcCreateProgram_fn, "nvrtcCreateProgram");
    LOAD(CompileProgram, nvrtcCompileProgram_fn, "nvrtcCompileProgram");
    LOAD(GetProgramLogSize, nvrtcGetProgramLogSize_fn, "nvrtcGetProgramLogSize");
    LOAD(GetProgramLog, nvrtcGetProgramLog_fn, "nvrtcGetProgramLog");
    LOAD(GetCUBINSize, nvrtcGetCUBINSize_fn, "nvrtcGetCUBINSize");  // NVRTC >= 11.2
    LOAD(DestroyProgram, nvrtcDestroyProgram_fn, "nvrtcDestroyProgram");
    return 1;
}

// Open NVRTC: each soname bare (LD_LIBRARY_PATH, ld.so.cache), then under $CUDA_HOME/lib64/,
// /usr/local/cuda/lib64/ and /usr/local/cuda/targets/x86_64-linux/lib/. On success `path` holds
// what was opened; on failure every dlerror() message is printed.
static void *open_nvrtc(char *path, size_t cap)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    static char errors[8192];
    char cuda_home_lib[4096];
    const char *cuda_home = getenv("CUDA_HOME");
    const char *prefixes[4];
    size_t nerr = 0;
    int nprefixes = 0, p, i;

    prefixes[nprefixes++] = "";
    if (cuda_home && cuda_home[0]) {
        int n = snprintf(cuda_home_lib, sizeof cuda_home_lib, "%s/lib64/", cuda_home);
        if (n > 0 && (size_t)n < sizeof cuda_home_lib &&
            strcmp(cuda_home_lib, "/usr/local/cuda/lib64/") != 0)
            prefixes[nprefixes++] = cuda_home_lib;
    }
    prefixes[nprefixes++] = "/usr/local/cuda/lib64/";
    prefixes[nprefixes++] = "/usr/local/cuda/targets/x86_64-linux/lib/";

    for (p = 0; p < nprefixes; p++) {
        for (i = 0; i < 3; i++) {
            void *lib;
            int n = snprintf(path, cap, "%s%s", prefixes[p], names[i]);
            if (n < 0 || (size_t)n >= cap) continue;
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) return lib;
            n = snprintf(errors + nerr, sizeof errors - nerr, "check_kernels: dlopen: %s\n",
                         dlerror());
            if (n > 0 && (size_t)n < sizeof errors - nerr) nerr += (size_t)n;
        }
    }
    fputs(errors, stderr);
    return NULL;
}

// Join every kernel file of fat5__kernel_files[], each behind `#line 1 "kernels/<name>"`, into one
// program text, as the runtime does. Returns malloc'd text or NULL (out of memory).
static char *join_program(void)
{
    size_t total = 1, pos = 0, i;
    int k;
    char *src;
    for (k = 0; fat5__kernel_files[k].name; k++) {
        total += strlen("#line 1 \"kernels/\"\n") + strlen(fat5__kernel_files[k].name);
        for (i = 0; fat5__kernel_files[k].lines[i]; i++) total += strlen(fat5__kernel_files[k].lines[i]);
    }
    src = (char *)malloc(total);
    if (!src) return NULL;
    for (k = 0; fat5__kernel_files[k].name; k++) {
        pos += (size_t)sprintf(src + pos, "#line 1 \"kernels/%s\"\n", fat5__kernel_files[k].name);
        for (i = 0; fat5__kernel_files[k].lines[i]; i++) {
            size_t n = strlen(fat5__kernel_files[k].lines[i]);
            memcpy(src + pos, fat5__kernel_files[k].lines[i], n);
            pos += n;
        }
    }
    src[pos] = '\0';
    return src;
}

// Compile part `part` of the program once, as the runtime does (each part an NVRTC program of its
// own: "#define FAT5_PART part" before the joined files, kernels/00_common.cu); 0 ok, 1 compile
// error, 2 NVRTC API failure. `variant` is the -DFAT5_ACT_BF16=... option.
static int compile_one(const char *whole, int part, const char *variant, const char *arch)
{
    char *src = (char *)malloc(strlen(whole) + 32);
    char arch_opt[32];
    const char *opts[5];
    const char *res = getenv("FAT5_CHECK_RESOURCES");
    int nopts = res && res[0] && strcmp(res, "0") != 0 ? 5 : 4;
    const char *only = getenv("FAT5_CHECK_PARTS");
    nvrtcProgram prog = NULL;
    nvrtcResult rc, compile_rc;
    size_t log_size = 0, cubin_size = 0;
    char *log = NULL;
    int status = 0;
    if (only && only[0]) {  // FAT5_CHECK_PARTS=a,b,...: those parts alone
        const char *c = only;
        int want = 0;
        while (*c && !want) {
            want = atoi(c) == part;
            c += strcspn(c, ",");
            if (*c) c++;
        }
        if (!want) {
            free(src);
            return 0;
        }
    }

    snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
    opts[0] = variant;
    opts[1] = arch_opt;
    opts[2] = "--std=c++17";
    opts[3] = "-default-device";
    opts[4] = "-Xptxas=-v";  // only with FAT5_CHECK_RESOURCES (nopts 5)

    if (!src) {
        printf("kernels/*.cu %s %s part %d: out of memory\n", variant + 2, arch, part);
        return 2;
    }
    sprintf(src, "#define FAT5_PART %d\n", part);
    strcat(src, whole);
    rc = nvrtc.CreateProgram(&prog, src, "fat5_kernels.cu", 0, NULL, NULL);
    free(src);
    if (rc != 0) {
        fprintf(stderr, "%s %s part %d: nvrtcCreateProgram: %s\n", variant + 2, arch, part,
                nvrtc.GetErrorString(rc));
        return 2;
    }
    compile_rc = nvrtc.CompileProgram(prog, nopts, opts);

    // Always fetch the log (its size counts the terminating NUL), then look at the result.
    rc = nvrtc.GetProgramLogSize(prog, &log_size);
    if (rc == 0 && log_size > 1) {
        log = (char *)malloc(log_size);
        if (log && nvrtc.GetProgramLog(prog, log) == 0) {
            log[log_size - 1] = '\0';
        } else {
            free(log);
            log = NULL;
        }
    }

    if (compile_rc != 0) {
        printf("kernels/*.cu %s %s part %d: FAILED (%s; options %s %s %s %s)\n", variant + 2, arch, part,
               nvrtc.GetErrorString(compile_rc), opts[0], opts[1], opts[2], opts[3]);
        if (log) printf("%s\n", log);
        status = 1;
    } else if ((rc = nvrtc.GetCUBINSize(prog, &cubin_size)) != 0) {
        printf("kernels/*.cu %s %s part %d: nvrtcGetCUBINSize: %s\n", variant + 2, arch, part,
               nvrtc.GetErrorString(rc));
        status = 2;
    } else if (cubin_size == 0) {
        printf("kernels/*.cu %s %s part %d: FAILED (empty cubin)\n", variant + 2, arch, part);
        status = 1;
    } else {
        printf("kernels/*.cu %s %s part %d: ok (cubin %lu bytes)\n", variant + 2, arch, part,
               (unsigned long)cubin_size);
        if (log) printf("%s\n", log);  // warnings (and the resource report when asked for)
    }
    free(log);
    nvrtc.DestroyProgram(&prog);
    return status;
}

// Compiles every (variant, arch, part) triple, `jobs` child processes at a time, each writing its
// lines to its own temporary file; prints them in order. Returns the worst compile_one status.
static int compile_all(const char *src, const char *const variants[2], const char *const archs[2], int parts)
{
    const char *env = getenv("FAT5_CHECK_JOBS");
    long jobs = env && env[0] ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    int worst = 0, first, i, n = 4 * parts;
    FILE **out = (FILE **)calloc((size_t)n, sizeof *out);
    pid_t *pid = (pid_t *)calloc((size_t)n, sizeof *pid);
    if (!out || !pid) {
        fprintf(stderr, "check_kernels: out of memory\n");
        return 2;
    }
    if (jobs < 1) jobs = 1;
    if (jobs > 64) jobs = 64;
    fflush(stdout);
    for (first = 0; first < n; first += (int)jobs) {
        int last = first + (int)jobs < n ? first + (int)jobs : n;
        for (i = first; i < last; i++) {
            const char *variant = variants[i / parts / 2], *arch = archs[i / parts % 2];
            int part = i % parts;
            if (jobs == 1 || !(out[i] = tmpfile()) || (pid[i] = fork()) < 0) {
                // no parallelism available: compile here
                int st = compile_one(src, part, variant, arch);
                if (st > worst) worst = st;
                fflush(stdout);
                if (out[i]) fclose(out[i]);
                out[i] = NULL;
                pid[i] = 0;
                continue;
            }
            if (pid[i] == 0) {
                int st;
                fflush(stdout);
                if (dup2(fileno(out[i]), STDOUT_FILENO) < 0) _exit(2);
                st = compile_one(src, part, variant, arch);
                fflush(stdout);
                _exit(st);
            }
        }
        for (i = first; i < last; i++) {
            int wst = 0, st;
            char buf[4096];
            size_t k;
            if (!pid[i]) continue;
            if (waitpid(pid[i], &wst, 0) != pid[i]) st = 2;
            else st = WIFEXITED(wst) ? WEXITSTATUS(wst) : 2;
            rewind(out[i]);
            while ((k = fread(buf, 1, sizeof buf, out[i])) > 0) fwrite(buf, 1, k, stdout);
            fclose(out[i]);
            if (!WIFEXITED(wst))
                printf("kernels/*.cu %s %s part %d: the compiling process died (signal %d)\n",
                       variants[i / parts / 2] + 2, archs[i / parts % 2], i % parts,
                       WIFSIGNALED(wst) ? WTERMSIG(wst) : 0);
            if (st > worst) worst = st;
            fflush(stdout);
        }
    }
    free(out);
    free(pid);
    return worst;
}

// NVRTC is missing or unusable: a skip (exit 0) unless FAT5_REQUIRE_NVRTC asks for it (exit 2).
static int no_nvrtc(const char *why)
{
    const char *req = getenv("FAT5_REQUIRE_NVRTC");
    if (!req || !req[0] || strcmp(req, "0") == 0) {
        printf("check-kernels: SKIP (no NVRTC: %s)\n", why);
        return 0;
    }
    fprintf(stderr, "check_kernels: %s (FAT5_REQUIRE_NVRTC=%s)\n", why, req);
    return 2;
}

int main(void)
{
    static const char *const archs[] = {"sm_80", "sm_90a"};
    static const char *const variants[] = {"-DFAT5_ACT_BF16=0", "-DFAT5_ACT_BF16=1"};
    char loaded[4096], why[4200];
    void *lib = open_nvrtc(loaded, sizeof loaded), *builtins_lib = NULL;
    int major = 0, minor = 0, v, worst = 0, nfiles = 0;
    char *src;

    if (!lib)
        return no_nvrtc("cannot load libnvrtc (see the dlopen errors above; set CUDA_HOME or "
                        "LD_LIBRARY_PATH)");
    if (!load_nvrtc(lib)) {
        snprintf(why, sizeof why, "%s lacks an NVRTC entry point (need NVRTC >= 11.2)", loaded);
        return no_nvrtc(why);
    }
    if (nvrtc.Version(&major, &minor) != 0) return no_nvrtc("nvrtcVersion failed");
    // libnvrtc has no RUNPATH and dlopens "libnvrtc-builtins.so.<major>.<minor>" by name at the
    // first compile. When it came from a directory outside the loader's search path, load the
    // builtins from that same directory now, so that the by-name lookup finds them loaded.
    if (strchr(loaded, '/')) {
        char builtins[4096];
        const char *slash = strrchr(loaded, '/');
        int n = snprintf(builtins, sizeof builtins, "%.*slibnvrtc-builtins.so.%d.%d",
                         (int)(slash + 1 - loaded), loaded, major, minor);
        if (n > 0 && (size_t)n < sizeof builtins) builtins_lib = dlopen(builtins, RTLD_NOW);
    }
    printf("NVRTC %d.%d (%s)\n", major, minor, loaded);

    while (fat5__kernel_files[nfiles].name) nfiles++;
    if (nfiles == 0) {
        fprintf(stderr, "check_kernels: fat5_kernels.cuh holds no kernel files\n");
        return 1;
    }
    printf("program: %d files joined (", nfiles);
    for (v = 0; v < nfiles; v++) printf("%s%s", v ? " " : "", fat5__kernel_files[v].name);
    printf(")\n");
    fflush(stdout);
    src = join_program();
    if (!src) {
        fprintf(stderr, "check_kernels: out of memory\n");
        return 2;
    }
    {   // the parts the kernel files name (FAT5_IN_PART(k) guards): 0 .. the largest
        int parts = 1, k;
        size_t li;
        for (k = 0; fat5__kernel_files[k].name; k++)
            for (li = 0; fat5__kernel_files[k].lines[li]; li++) {
                const char *at = strstr(fat5__kernel_files[k].lines[li], "#if FAT5_IN_PART(");
                if (at && atoi(at + strlen("#if FAT5_IN_PART(")) + 1 > parts)
                    parts = atoi(at + strlen("#if FAT5_IN_PART(")) + 1;
            }
        printf("program: %d parts, each compiled on its own as the runtime does\n", parts);
        worst = compile_all(src, variants, archs, parts);
    }
    free(src);
    if (builtins_lib) dlclose(builtins_lib);
    dlclose(lib);
    return worst;
}
