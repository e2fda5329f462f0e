"""Tests of the project as a whole: the manual, the layout, the wheel."""
