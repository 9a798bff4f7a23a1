# edgeft data path core: map layout mirror, map access, bcc compile, test runs.
