#!/usr/bin/env node
'use strict';
// The halrt command line: `halrt devices`, `halrt run MODULE ...`.
// See lib/cli.js.
require('../lib/cli').main(process.argv).then((code) => {
  process.exitCode = code;
});
