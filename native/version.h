/* QC_VERSION comes from the build (CMakeLists.txt reads src/quietcore/_version.py). */
#ifndef QC_VERSION
#define QC_VERSION "unknown"
#endif
