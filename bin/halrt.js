#!/usr/bin/env node
'use strict';
// The halrt command line: `halrt devices`, `halrt run MODULE ...`.
// See lib/cli.js.

// A reader that goes away (`halrt devices | head -1`) ends the output, not
// the command: EPIPE on stdout is not an error, and what is left is dropped.
process.stdout.on('error', (error) => {
  if (error.code !== 'EPIPE') throw error;
});
require('../lib/cli').main(process.argv).then((code) => {
  process.exitCode = code;
});
