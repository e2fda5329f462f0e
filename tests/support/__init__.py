"""What several tests share: helpers, scenario files and stored runs."""
