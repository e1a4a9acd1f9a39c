/* A NumPy data allocator that keeps the memory of freed large arrays for the
 * next ones (traceparse.core.memory).
 *
 * Loading a capture and computing its tables makes and frees hundreds of
 * arrays of a row each, tens of MB apiece. With NumPy's default allocator each
 * goes to glibc, which maps an allocation above its mmap threshold (at most
 * 32 MiB) anew and unmaps it on free, so the kernel hands over and zeroes the
 * same amount again, a page fault per 4 KiB; NumPy also asks for huge pages
 * for arrays of 4 MiB or more, which may stall the kernel to compact memory.
 * Inside a pool scope, arrays of 1 MiB or more get pages of their
 * own here, and when freed their pages wait in a cache for the next array,
 * split or grown (mremap) to its size; the cache is emptied when the
 * outermost scope ends. Freed pages are taken before fresh ones, so the
 * process never holds more than its peak of live arrays.
 *
 * NumPy chooses the allocator of an array when it makes it (a context
 * variable, set by PyDataMem_SetHandler) and frees it with the same one, so
 * arrays made in a scope may outlive it: their pages are then unmapped.
 *
 * The NumPy C API is reached through its capsule, as numpy's import_array
 * does, without NumPy's headers at build time: the table's slots are part of
 * NumPy's ABI (PyDataMem_SetHandler is slot 304 from API version 0x0f, NumPy
 * 1.22).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Smaller arrays come from malloc, as NumPy's own do (tests lower it). */
static size_t pooled_from = (size_t)1 << 20;
#define MAX_CACHED 512
/* In front of every block: what free and realloc need to know about it. */
#define HEADER 16

typedef struct {
    size_t length; /* of the mapping; 0: the block came from malloc */
    size_t size;   /* bytes asked for */
} header;

typedef struct {
    char *base;
    size_t length;
} span;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static span cached[MAX_CACHED];
static int n_cached = 0;
static long scopes = 0; /* open pool scopes, all threads */
static size_t page = 4096;

/* Statistics for tests and benchmarks (pool_stats). */
static unsigned long long fresh_bytes = 0, reused_bytes = 0;

static size_t round_to_page(size_t n) { return (n + page - 1) / page * page; }

static void *mapped(size_t length) {
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* A span of `length` bytes: freed pages first (the smallest cached span that
 * holds it, its rest cached again; else the largest, grown), fresh ones only
 * when nothing is cached. Called with the lock held. */
static char *take(size_t *length_io, int *dirty) {
    size_t length = *length_io;
    int best = -1, largest = -1;
    for (int i = 0; i < n_cached; i++) {
        if (cached[i].length >= length && (best < 0 || cached[i].length < cached[best].length))
            best = i;
        if (largest < 0 || cached[i].length > cached[largest].length) largest = i;
    }
    if (best >= 0) {
        span s = cached[best];
        if (s.length - length >= pooled_from) {
            cached[best].base = s.base + length;
            cached[best].length = s.length - length;
        } else {
            cached[best] = cached[--n_cached];
            *length_io = s.length; /* a rest too small to cache stays with the block */
        }
        reused_bytes += *length_io;
        *dirty = 1;
        return s.base;
    }
#ifdef MREMAP_MAYMOVE
    if (largest >= 0) {
        span s = cached[largest];
        void *grown = mremap(s.base, s.length, length, MREMAP_MAYMOVE);
        if (grown != MAP_FAILED) {
            cached[largest] = cached[--n_cached];
            reused_bytes += s.length;
            fresh_bytes += length - s.length;
            *dirty = 1;
            return grown;
        }
    }
#endif
    fresh_bytes += length;
    *dirty = 0;
    return mapped(length);
}

static void give_back(char *base, size_t length) {
    pthread_mutex_lock(&lock);
    if (scopes > 0 && n_cached < MAX_CACHED) {
        cached[n_cached].base = base;
        cached[n_cached].length = length;
        n_cached++;
        pthread_mutex_unlock(&lock);
        return;
    }
    pthread_mutex_unlock(&lock);
    munmap(base, length);
}

static void *pool_alloc(size_t size, int zeroed) {
    if (size > SIZE_MAX - page - HEADER) return NULL;
    if (size + HEADER < pooled_from) {
        char *p = zeroed ? calloc(1, size + HEADER) : malloc(size + HEADER);
        if (p == NULL) return NULL;
        ((header *)p)->length = 0;
        ((header *)p)->size = size;
        return p + HEADER;
    }
    size_t length = round_to_page(size + HEADER);
    int dirty = 0;
    pthread_mutex_lock(&lock);
    char *base = take(&length, &dirty);
    pthread_mutex_unlock(&lock);
    if (base == NULL) return NULL;
    if (dirty && zeroed) memset(base + HEADER, 0, size);
    ((header *)base)->length = length;
    ((header *)base)->size = size;
    return base + HEADER;
}

static void *pool_malloc(void *ctx, size_t size) {
    (void)ctx;
    return pool_alloc(size, 0);
}

static void *pool_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;
    if (elsize != 0 && nelem > SIZE_MAX / elsize) return NULL;
    return pool_alloc(nelem * elsize, 1);
}

static void pool_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size; /* NumPy's own idea of the size; the header's is the one to trust */
    if (ptr == NULL) return;
    char *base = (char *)ptr - HEADER;
    header h = *(header *)base;
    if (h.length == 0)
        free(base);
    else
        give_back(base, h.length);
}

static void *pool_realloc(void *ctx, void *ptr, size_t new_size) {
    if (ptr == NULL) return pool_malloc(ctx, new_size);
    char *base = (char *)ptr - HEADER;
    header h = *(header *)base;
    if (h.length == 0 && new_size + HEADER < pooled_from) {
        char *p = realloc(base, new_size + HEADER);
        if (p == NULL) return NULL;
        ((header *)p)->size = new_size;
        return p + HEADER;
    }
    if (h.length != 0 && new_size <= h.length - HEADER) {
        ((header *)base)->size = new_size;
        return ptr;
    }
    void *moved = pool_alloc(new_size, 0);
    if (moved == NULL) return NULL;
    memcpy(moved, ptr, h.size < new_size ? h.size : new_size);
    pool_free(ctx, ptr, h.size);
    return moved;
}

/* NumPy's handler record (numpy/ndarraytypes.h, version 1). */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} data_allocator;

typedef struct {
    char name[127];
    uint8_t version;
    data_allocator allocator;
} data_handler;

static data_handler handler = {
    "traceparse_pool", 1, {NULL, pool_malloc, pool_calloc, pool_realloc, pool_free}};

static PyObject *handler_capsule = NULL;
static PyObject *(*set_handler)(PyObject *) = NULL;

#define NPY_1_22_API_VERSION 0x0000000f
#define SLOT_FEATURE_VERSION 211
#define SLOT_SET_HANDLER 304

/* NumPy's PyDataMem_SetHandler, or NULL with an exception set. */
static int find_set_handler(void) {
    if (set_handler != NULL) return 0;
    PyObject *module = PyImport_ImportModule("numpy._core._multiarray_umath");
    if (module == NULL) {
        PyErr_Clear();
        module = PyImport_ImportModule("numpy.core._multiarray_umath");
    }
    if (module == NULL) return -1;
    PyObject *capsule = PyObject_GetAttrString(module, "_ARRAY_API");
    Py_DECREF(module);
    if (capsule == NULL) return -1;
    void **api = PyCapsule_GetPointer(capsule, NULL);
    Py_DECREF(capsule); /* the table lives as long as NumPy, which is never unloaded */
    if (api == NULL) return -1;
    unsigned int feature = ((unsigned int (*)(void))api[SLOT_FEATURE_VERSION])();
    if (feature < NPY_1_22_API_VERSION) {
        PyErr_SetString(PyExc_RuntimeError, "NumPy before 1.22 has no data allocators");
        return -1;
    }
    set_handler = (PyObject * (*)(PyObject *)) api[SLOT_SET_HANDLER];
    return 0;
}

static PyObject *enter(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    if (find_set_handler() < 0) return NULL;
    PyObject *before = set_handler(handler_capsule);
    if (before == NULL) return NULL;
    pthread_mutex_lock(&lock);
    scopes++;
    pthread_mutex_unlock(&lock);
    return before;
}

PyDoc_STRVAR(enter_doc,
             "enter() -> handler\n\nNumPy arrays made from now on in this context come from "
             "the pool; returns the allocator in use before, for leave().");

static PyObject *leave(PyObject *self, PyObject *before) {
    (void)self;
    if (set_handler == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "leave() without enter()");
        return NULL;
    }
    PyObject *ours = set_handler(before);
    if (ours == NULL) return NULL;
    Py_DECREF(ours);
    span drained[MAX_CACHED];
    int n = 0;
    pthread_mutex_lock(&lock);
    if (scopes > 0 && --scopes == 0) {
        memcpy(drained, cached, sizeof(span) * (size_t)n_cached);
        n = n_cached;
        n_cached = 0;
    }
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) munmap(drained[i].base, drained[i].length);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(leave_doc,
             "leave(handler)\n\nPuts back the allocator enter() returned; the outermost scope "
             "also unmaps the cached pages.");

static PyObject *stats(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    size_t held = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n_cached; i++) held += cached[i].length;
    PyObject *out = Py_BuildValue("{s:K,s:K,s:n,s:i,s:l}", "fresh_bytes", fresh_bytes,
                                  "reused_bytes", reused_bytes, "cached_bytes", (Py_ssize_t)held,
                                  "cached_spans", n_cached, "scopes", scopes);
    pthread_mutex_unlock(&lock);
    return out;
}

PyDoc_STRVAR(stats_doc,
             "stats() -> dict\n\nBytes mapped fresh and reused since the start, and what the "
             "cache holds now.");

static PyObject *set_pooled_from(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t size = PyLong_AsSsize_t(arg);
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 1) {
        PyErr_SetString(PyExc_ValueError, "the size must be positive");
        return NULL;
    }
    pthread_mutex_lock(&lock);
    size_t before = pooled_from;
    pooled_from = (size_t)size;
    pthread_mutex_unlock(&lock);
    return PyLong_FromSize_t(before);
}

PyDoc_STRVAR(set_pooled_from_doc,
             "set_pooled_from(size) -> int\n\nArrays of `size` bytes or more (with the "
             "block's header) come from the pool from now on; returns the size before. For "
             "tests.");

static PyMethodDef methods[] = {
    {"set_pooled_from", set_pooled_from, METH_O, set_pooled_from_doc},
    {"enter", enter, METH_NOARGS, enter_doc},
    {"leave", leave, METH_O, leave_doc},
    {"stats", stats, METH_NOARGS, stats_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_pool",
    "A NumPy data allocator that reuses the pages of freed large arrays "
    "(see traceparse.core.memory).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

/* A child of fork starts outside any scope: what the cache held was the
 * parent's, and a scope the parent had open is not the child's to close. */
static void lock_for_fork(void) { pthread_mutex_lock(&lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&lock); }
static void reset_in_child(void) {
    pthread_mutex_init(&lock, NULL);
    for (int i = 0; i < n_cached; i++) munmap(cached[i].base, cached[i].length);
    n_cached = 0;
    scopes = 0;
}

PyMODINIT_FUNC PyInit__pool(void) {
    long size = sysconf(_SC_PAGESIZE);
    if (size > 0) page = (size_t)size;
    if (pthread_atfork(lock_for_fork, unlock_after_fork, reset_in_child) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
    handler_capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (handler_capsule == NULL) return NULL;
    return PyModule_Create(&module);
}
