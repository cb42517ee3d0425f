/* SHA-256 of concatenated byte strings, for the state tree's many short hashes.
 *
 * `sha256_of(*parts)` returns SHA-256(parts[0] || parts[1] || ...) as 32 bytes, the same
 * digest as `hashlib.sha256(b"".join(parts)).digest()`. hashlib spends most of a short
 * hash on per-call setup (a new digest context, then a copy of it for `.digest()`); this
 * reuses one OpenSSL context and hashes the parts without joining them, about 2.5x faster
 * for the 50-100 byte inputs of `hash_fork`, `hash_labeled` and `hash_leaf`.
 *
 * The GIL is held for the whole call, so the one module-wide context is never used by
 * two threads at once. Built as an optional extension: `state_manager.sha256` falls back to
 * hashlib when it is absent. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>

static EVP_MD *sha256_md;
static EVP_MD_CTX *sha256_ctx;

static PyObject *sha256_of(PyObject *module, PyObject *const *parts, Py_ssize_t count) {
    unsigned char digest[32];
    unsigned int length = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!PyBytes_Check(parts[i])) {
            PyErr_Format(PyExc_TypeError, "sha256_of takes bytes, got %.100s", Py_TYPE(parts[i])->tp_name);
            return NULL;
        }
    }
    if (!EVP_DigestInit_ex(sha256_ctx, sha256_md, NULL))
        goto failed;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!EVP_DigestUpdate(sha256_ctx, PyBytes_AS_STRING(parts[i]), (size_t)PyBytes_GET_SIZE(parts[i])))
            goto failed;
    }
    if (!EVP_DigestFinal_ex(sha256_ctx, digest, &length) || length != sizeof digest)
        goto failed;
    return PyBytes_FromStringAndSize((const char *)digest, sizeof digest);
failed:
    PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
    return NULL;
}

static PyMethodDef methods[] = {
    {"sha256_of", (PyCFunction)(void (*)(void))sha256_of, METH_FASTCALL,
     "sha256_of(*parts: bytes) -> bytes: SHA-256 of the concatenated parts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sha256", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sha256(void) {
    if (sha256_md == NULL) {
        sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
        sha256_ctx = EVP_MD_CTX_new();
        if (sha256_md == NULL || sha256_ctx == NULL) {
            PyErr_SetString(PyExc_ImportError, "OpenSSL has no SHA-256");
            return NULL;
        }
    }
    return PyModule_Create(&module);
}
