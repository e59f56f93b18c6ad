// The trainyard-s3 module: the S3 client behind one C entry point, loaded by LoadS3Store
// (s3_loader.cpp) with dlopen. The module carries its own copy of the S3 client and of the core
// code it uses; only the entry point below is exported.
#include "objstore/objstore.h"

extern "C" __attribute__((visibility("default"))) ty::objstore::ObjectStore* ty_objstore_new_s3_store(
    const ty::ObjectStoreConfig* config) {
  try {
    return ty::objstore::NewS3Store(*config).release();
  } catch (...) {
    return nullptr;
  }
}
