#!/usr/bin/env node
'use strict';
// The halrt command line: `halrt devices`, `halrt run MODULE ...`.
// See lib/cli.js.

// A reader that goes away (`halrt devices | head -1`) ends the output, not
// the command: EPIPE on stdout is not an error, and what is left is dropped.
// Any other write error (a full disk) fails the run with one line.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') return;
  process.stderr.write(`halrt: cannot write the output: ${error.message}\n`);
  process.exit(1);
});
require('../lib/cli').main(process.argv).then((code) => {
  process.exitCode = code;
});
