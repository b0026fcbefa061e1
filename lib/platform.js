'use strict';
// The napi-rs platform triple that names the binary (tiergate.<triple>.node) and its npm package.
function platformTriple() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    const report = process.report && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

module.exports = { platformTriple };
