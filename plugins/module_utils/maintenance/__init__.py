# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Switch maintenance: which hosts and planes a switch serves, the guards checked
before a drain, the verdicts after a drain and an undrain, and the report."""
