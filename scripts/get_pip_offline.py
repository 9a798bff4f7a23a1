"""Offline stand-in for pip's get-pip.py, used by ansible-test to put pip into its venvs.

ansible-test downloads get-pip.py from a site outside the package registries,
which this project's CI cannot reach. This does the same job from what is
reachable: pip from the interpreter's bundled wheel (ensurepip), then the
requested pip version and packages from the configured package index.
Called as: python get_pip_<version>.py [pip install options] [packages].
"""

import ensurepip
import subprocess
import sys


def main():
    ensurepip.bootstrap(upgrade=True, default_pip=True)
    # get-pip.py accepts these to skip setuptools/wheel; pip install does not.
    args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
    subprocess.check_call([sys.executable, '-m', 'pip', 'install'] + args)


if __name__ == '__main__':
    main()
